/* src/logdedup.c - workers' lines deduplicated on the driver (see
 * logdedup.h).  The lines seen within the window are kept by their
 * canonical form in a hash table and in the order their windows started
 * (a list), so a tick looks only at the oldest.  At most DEDUP_MAX forms
 * are kept: past that a new form is printed and not kept. */
#include "logdedup.h"

#include <errno.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#define DEDUP_BUCKETS 1024
#define DEDUP_MAX 4096
#define DEDUP_LINE_MAX 16384

typedef struct dd_entry {
  struct dd_entry *hnext;              /* its bucket */
  struct dd_entry *prev, *next;        /* by window start, oldest first */
  uint64_t hash, start_ns;
  FILE *f;
  char *key;                           /* canonical form */
  char *line;                          /* the last line counted (or the first) */
  int pid;                             /* ... and its worker */
  char ip[48];
  char name[104];                      /* ... and the task or actor it came from */
  int first_pid;                       /* the worker that printed it first */
  char first_ip[48];
  int many;                            /* another worker printed it too */
  unsigned long count;                 /* lines held since the window started */
} dd_entry;

struct rd__dedup {
  uint64_t window_ns;
  regex_t allow, skip;
  int has_allow, has_skip;
  dd_entry *buckets[DEDUP_BUCKETS];
  dd_entry *head, *tail;
  size_t n;
  int told;                            /* the first [repeated] line says how to turn this off */
};

void rd__worker_prefix(char *out, size_t len, int pid, const char *ip, const char *name) {
  snprintf(out, len, "(%.100s%spid=%d%s%.64s) ", name ? name : "", name && *name ? " " : "", pid,
           ip && !*ip ? "" : ", ip=", ip ? ip : "?");   /* no ip: the driver's own embedded node, as Ray's */
}

static void put(FILE *f, int pid, const char *ip, const char *name, const char *line, size_t len, const char *tail) {
  char prefix[RD_WORKER_PREFIX_MAX];
  rd__worker_prefix(prefix, sizeof(prefix), pid, ip, name);
  fputs(prefix, f);   /* the line as written, NUL bytes too */
  fwrite(line, 1, len, f);
  fprintf(f, "%s\n", tail);
}

/* The line without its words that hold a digit (or 0x and hex): what
 * differs between workers printing the same thing.  Malloc'd; NULL: out of
 * memory. */
static char *canonical(const char *line, size_t len) {
  char *out = malloc(len + 1);
  if (!out) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < len;) {
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) i++;
    size_t s = i;
    int digits = 0;
    while (i < len && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') {
      if (line[i] >= '0' && line[i] <= '9') digits = 1;
      i++;
    }
    if (i == s || digits) continue;
    if (k) out[k++] = ' ';
    memcpy(out + k, line + s, i - s);
    k += i - s;
  }
  out[k] = 0;
  return out;
}

static uint64_t fnv(const FILE *f, const char *s) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)f;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static void list_unlink(rd__dedup *d, dd_entry *e) {
  if (e->prev) e->prev->next = e->next;
  else d->head = e->next;
  if (e->next) e->next->prev = e->prev;
  else d->tail = e->prev;
  e->prev = e->next = NULL;
}

static void list_append(rd__dedup *d, dd_entry *e) {
  e->prev = d->tail;
  e->next = NULL;
  if (d->tail) d->tail->next = e;
  else d->head = e;
  d->tail = e;
}

static void entry_drop(rd__dedup *d, dd_entry *e) {
  list_unlink(d, e);
  for (dd_entry **pp = &d->buckets[e->hash % DEDUP_BUCKETS]; *pp; pp = &(*pp)->hnext)
    if (*pp == e) {
      *pp = e->hnext;
      break;
    }
  free(e->key);
  free(e->line);
  free(e);
  d->n--;
}

/* What e held, printed: the last line alone when one was held, else with
 * how many. */
static void entry_print(rd__dedup *d, const dd_entry *e) {
  if (e->count == 1) {
    put(e->f, e->pid, e->ip, e->name, e->line, strlen(e->line), "");
  } else if (e->count > 1) {
    char tail[200];
    snprintf(tail, sizeof(tail), " [repeated %lux across cluster]%s", e->count,
             d->told ? "" : " (raydist deduplicates workers' lines as Ray does: RAYDIST_DEDUP_LOGS=0 prints them all)");
    d->told = 1;
    put(e->f, e->pid, e->ip, e->name, e->line, strlen(e->line), tail);
  }
  if (e->count) fflush(e->f);
}

static int regex_env(const char *name, regex_t *re, int *has, char *why, size_t whylen) {
  const char *v = getenv(name);
  *has = 0;
  if (!v || !*v) return 0;
  int rc = regcomp(re, v, REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    char msg[200];
    regerror(rc, re, msg, sizeof(msg));
    snprintf(why, whylen, "%s is not a regular expression (POSIX extended): %s", name, msg);
    return -1;
  }
  *has = 1;
  return 0;
}

int rd__dedup_from_env(rd__dedup **out, char *why, size_t whylen) {
  *out = NULL;
  const char *on = getenv("RAYDIST_DEDUP_LOGS");
  if (on && !strcmp(on, "0")) return 0;
  const char *w = getenv("RAYDIST_DEDUP_LOGS_AGG_WINDOW_S");
  double win = 5;
  if (w && *w) {
    char *end = NULL;
    errno = 0;
    win = strtod(w, &end);
    if (errno || *end || !(win > 0 && win <= 3600)) {
      snprintf(why, whylen, "RAYDIST_DEDUP_LOGS_AGG_WINDOW_S must be seconds (above 0, at most 3600), not '%.40s'", w);
      return -1;
    }
  }
  rd__dedup *d = calloc(1, sizeof(*d));
  if (!d) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  d->window_ns = (uint64_t)(win * 1e9);
  if (regex_env("RAYDIST_DEDUP_LOGS_ALLOW_REGEX", &d->allow, &d->has_allow, why, whylen) != 0 ||
      regex_env("RAYDIST_DEDUP_LOGS_SKIP_REGEX", &d->skip, &d->has_skip, why, whylen) != 0) {
    if (d->has_allow) regfree(&d->allow);
    free(d);
    return -1;
  }
  *out = d;
  return 0;
}

void rd__dedup_line(rd__dedup *d, FILE *f, int pid, const char *ip, const char *name, const char *line, size_t len,
                    uint64_t now_ns) {
  char buf[DEDUP_LINE_MAX + 1];   /* NUL-terminated for the regexes (a longer piece is not deduplicated) */
  if (len > DEDUP_LINE_MAX || memchr(line, 0, len)) {   /* held copies are C strings: a line with NULs goes as it is */
    put(f, pid, ip, name, line, len, "");
    return;
  }
  memcpy(buf, line, len);
  buf[len] = 0;
  if (d->has_allow && regexec(&d->allow, buf, 0, NULL, 0) == 0) {
    put(f, pid, ip, name, line, len, "");
    return;
  }
  if (d->has_skip && regexec(&d->skip, buf, 0, NULL, 0) == 0) return;
  char *key = canonical(line, len);
  if (!key || !*key) {   /* nothing left to compare (or no memory): printed */
    free(key);
    put(f, pid, ip, name, line, len, "");
    return;
  }
  if (!ip) ip = "?";
  uint64_t h = fnv(f, key);
  dd_entry *e = d->buckets[h % DEDUP_BUCKETS];
  while (e && !(e->hash == h && e->f == f && !strcmp(e->key, key))) e = e->hnext;
  if (e) {
    free(key);
    if (!e->many && (e->first_pid != pid || strcmp(e->first_ip, ip) != 0)) e->many = 1;
    if (!e->many) {   /* one worker's own repeats are its output: printed */
      put(f, pid, ip, name, line, len, "");
      return;
    }
    char *copy = malloc(len + 1);
    if (copy) {
      memcpy(copy, line, len);
      copy[len] = 0;
      free(e->line);
      e->line = copy;
      e->pid = pid;
      snprintf(e->ip, sizeof(e->ip), "%s", ip);
      snprintf(e->name, sizeof(e->name), "%s", name ? name : "");
    }
    e->count++;
    return;
  }
  put(f, pid, ip, name, line, len, "");
  if (d->n >= DEDUP_MAX) {   /* too many forms at once: this one is not followed */
    free(key);
    return;
  }
  e = calloc(1, sizeof(*e));
  char *copy = malloc(len + 1);
  if (!e || !copy) {
    free(e);
    free(copy);
    free(key);
    return;
  }
  memcpy(copy, line, len);
  copy[len] = 0;
  e->hash = h;
  e->f = f;
  e->key = key;
  e->line = copy;
  e->pid = e->first_pid = pid;
  snprintf(e->ip, sizeof(e->ip), "%s", ip);
  snprintf(e->name, sizeof(e->name), "%s", name ? name : "");
  snprintf(e->first_ip, sizeof(e->first_ip), "%s", ip);
  e->start_ns = now_ns;
  e->hnext = d->buckets[h % DEDUP_BUCKETS];
  d->buckets[h % DEDUP_BUCKETS] = e;
  list_append(d, e);
  d->n++;
}

uint64_t rd__dedup_tick(rd__dedup *d, uint64_t now_ns) {
  while (d->head && now_ns - d->head->start_ns >= d->window_ns) {
    dd_entry *e = d->head;
    entry_print(d, e);
    if (e->count > 1) {   /* still repeated: one more window, counted from zero */
      e->count = 0;
      e->start_ns = now_ns;
      list_unlink(d, e);
      list_append(d, e);
    } else {
      entry_drop(d, e);
    }
  }
  return d->head ? d->head->start_ns + d->window_ns - now_ns : UINT64_MAX;
}

void rd__dedup_free(rd__dedup *d) {
  if (!d) return;
  while (d->head) {
    entry_print(d, d->head);
    entry_drop(d, d->head);
  }
  if (d->has_allow) regfree(&d->allow);
  if (d->has_skip) regfree(&d->skip);
  free(d);
}
