/* runtime/autoscaler.c - the cluster autoscaler process (see autoscaler.h).
 *
 * Each round it tells the GCS which kinds of node it can start (nodes keep
 * requests only those could run waiting instead of refusing them), reads
 * the nodes and what each reports waiting (GetLoad), lets the policy in
 * scheduler/autoscale.c decide, runs launch commands, asks idle nodes to
 * leave (DrainNode: the node goes once it is idle, by itself), runs the
 * terminate command of those that left, and writes its status to the KV
 * store for `raydist status`.
 *
 * It runs under a keeper (`--supervise`, keeper.c) that starts it again
 * when it dies.  What it knows besides the GCS's tables - the next launch
 * id, its counts, and the launches whose node has not left yet (their
 * terminate command is still to run) - it keeps in the GCS KV store too,
 * written whenever it changes; a new process reads it back, and adopts any
 * live node with a raydist.io/node-type and launch-id that no launch
 * record names (one launched in the moment before the old process died, or
 * one that joined after its launch timed out). */
#include "autoscaler.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "conn.h"   /* rd__now_ns */
#include "gcs_client.h"
#include "keeper.h"
#include "log.h"
#include "metrics.h"   /* rd__mbuf */
#include "raydist/error.h"

extern char **environ;

/* ------------------------------------------------------------ the config */

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  return s;
}

/* A node type's resources: rd__res_parse_spec, and not nothing. */
static int parse_res(const char *spec, rd_resources *r, char *err, size_t errlen) {
  if (rd__res_parse_spec(spec, r, err, errlen) != 0) return RD_EINVAL;
  if (!r->cpu && !r->gpu && !r->memory && !r->ncustom) {
    snprintf(err, errlen, "resources: a node with nothing to offer");
    return RD_EINVAL;
  }
  return 0;
}

static int parse_uint(const char *v, uint64_t max, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (!*v || *end || errno || x > max || *v == '-') return -1;
  *out = x;
  return 0;
}

/* A node type's name: a label value (it becomes raydist.io/node-type). */
static int name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1])) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-') return 0;
  return 1;
}

/* A finished [type] section: labels made canonical with its own added. */
static int type_done(rd_as_type_conf *t, int has_res, char *err, size_t errlen) {
  if (!has_res || !t->launch[0]) {
    snprintf(err, errlen, "[type %s] needs resources and launch", t->name);
    return RD_EINVAL;
  }
  if (t->min_workers > t->max_workers) {
    snprintf(err, errlen, "[type %s]: min_workers %d is above max_workers %d", t->name, t->min_workers,
             t->max_workers);
    return RD_EINVAL;
  }
  char all[RD_LABELS_LEN + 128], why[200];
  snprintf(all, sizeof(all), "%s%s%s=%s", t->labels, t->labels[0] ? "," : "", RD_LABEL_NODE_TYPE, t->name);
  if (rd_labels_canon_sys(all, t->labels, sizeof(t->labels), why, sizeof(why)) != 0) {
    snprintf(err, errlen, "[type %s] labels: %s", t->name, why);
    return RD_EINVAL;
  }
  return 0;
}

int rd__as_config_load(const char *path, rd_as_config *c, char *err, size_t errlen) {
  memset(c, 0, sizeof(*c));
  c->idle_timeout_ms = 60000;
  c->launch_timeout_ms = 120000;
  c->interval_ms = 1000;
  c->max_launch = 5;
  c->upscaling_speed = 1.0;
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    return RD_EIO;
  }
  char line[4096];
  int lineno = 0, r = 0, has_res = 0;
  rd_as_type_conf *t = NULL;
  char where[64] = "";
  while (r == 0 && fgets(line, sizeof(line), f)) {
    lineno++;
    snprintf(where, sizeof(where), "%s:%d", path, lineno);
    if (!strchr(line, '\n') && !feof(f)) {
      snprintf(err, errlen, "%s: a line longer than %zu bytes", where, sizeof(line) - 2);
      r = RD_EINVAL;
      break;
    }
    char *s = trim(line);
    if (!*s || *s == '#') continue;
    if (*s == '[') {
      char name[128];
      if (t && (r = type_done(t, has_res, err, errlen)) != 0) break;
      if (sscanf(s, "[type %127[^] ]]", name) != 1 || !strchr(s, ']') || trim(strchr(s, ']') + 1)[0]) {
        snprintf(err, errlen, "%s: a section is [type NAME]", where);
        r = RD_EINVAL;
        break;
      }
      if (!name_ok(name)) {
        snprintf(err, errlen, "%s: node type name '%s' is not 1..63 letters, digits, '.', '_' or '-' beginning "
                 "and ending with a letter or digit", where, name);
        r = RD_EINVAL;
        break;
      }
      for (size_t i = 0; i < c->ntypes; i++)
        if (!strcmp(c->types[i].name, name)) {
          snprintf(err, errlen, "%s: node type '%s' given twice", where, name);
          r = RD_EINVAL;
        }
      if (r) break;
      if (c->ntypes == RD_AS_MAX_TYPES) {
        snprintf(err, errlen, "%s: more than %d node types", where, RD_AS_MAX_TYPES);
        r = RD_EINVAL;
        break;
      }
      t = &c->types[c->ntypes++];
      snprintf(t->name, sizeof(t->name), "%.63s", name);
      t->max_workers = 10;
      has_res = 0;
      continue;
    }
    char *eq = strchr(s, '=');
    if (!eq) {
      snprintf(err, errlen, "%s: expected key = value", where);
      r = RD_EINVAL;
      break;
    }
    *eq = 0;
    char *key = trim(s), *val = trim(eq + 1);
    uint64_t u;
    char why[300] = "";
    if (!t) {
      uint64_t *dst = !strcmp(key, "idle_timeout_s") ? &c->idle_timeout_ms
                      : !strcmp(key, "launch_timeout_s") ? &c->launch_timeout_ms : NULL;
      if (dst) {
        if (parse_uint(val, 86400 * 30, &u) != 0) snprintf(why, sizeof(why), "%s: seconds, 0..2592000", key);
        else *dst = u * 1000;
      } else if (!strcmp(key, "interval_ms")) {
        if (parse_uint(val, 5000, &u) != 0 || u < 50)   /* the GCS drops node types not sent for 10 s */
          snprintf(why, sizeof(why), "interval_ms: 50..5000");
        else c->interval_ms = u;
      } else if (!strcmp(key, "max_launch_batch")) {
        if (parse_uint(val, 64, &u) != 0 || u < 1) snprintf(why, sizeof(why), "max_launch_batch: 1..64");
        else c->max_launch = (int)u;
      } else if (!strcmp(key, "upscaling_speed")) {
        char *end;
        double v = strtod(val, &end);
        if (!*val || *end || !(v >= 0 && v <= 1000)) snprintf(why, sizeof(why), "upscaling_speed: a number, 0..1000");
        else c->upscaling_speed = v;
      } else {
        snprintf(why, sizeof(why), "unknown setting '%s' (idle_timeout_s, launch_timeout_s, interval_ms, "
                 "max_launch_batch, upscaling_speed; a node type's go under [type NAME])", key);
      }
    } else if (!strcmp(key, "resources")) {
      has_res = parse_res(val, &t->res, why, sizeof(why)) == 0;
    } else if (!strcmp(key, "idle_timeout_s")) {
      if (parse_uint(val, 86400 * 30, &u) != 0 || u < 1) snprintf(why, sizeof(why), "idle_timeout_s: seconds, 1..2592000");
      else t->idle_timeout_ms = u * 1000;
    } else if (!strcmp(key, "labels")) {
      char lw[200];
      if (rd_labels_canon(val, t->labels, sizeof(t->labels), lw, sizeof(lw)) != 0)
        snprintf(why, sizeof(why), "labels: %s", lw);
    } else if (!strcmp(key, "min_workers") || !strcmp(key, "max_workers")) {
      if (parse_uint(val, 1000, &u) != 0) snprintf(why, sizeof(why), "%s: 0..1000", key);
      else if (key[1] == 'i') t->min_workers = (int)u;
      else t->max_workers = (int)u;
    } else if (!strcmp(key, "launch") || !strcmp(key, "terminate")) {
      char *dst = key[0] == 'l' ? t->launch : t->terminate;
      if (strlen(val) >= sizeof(t->launch)) snprintf(why, sizeof(why), "%s: longer than %zu bytes", key, sizeof(t->launch) - 1);
      else snprintf(dst, sizeof(t->launch), "%s", val);
    } else {
      snprintf(why, sizeof(why), "unknown node type setting '%s' (resources, labels, min_workers, max_workers, "
               "idle_timeout_s, launch, terminate)", key);
    }
    if (why[0]) {
      snprintf(err, errlen, "%s: %s", where, why);
      r = RD_EINVAL;
    }
  }
  fclose(f);
  if (r == 0 && t) r = type_done(t, has_res, err, errlen);
  if (r == 0 && c->ntypes == 0) {
    snprintf(err, errlen, "%s: no [type NAME] section: nothing to start", path);
    r = RD_EINVAL;
  }
  return r;
}

/* ------------------------------------------------------------ launches */

static uint64_t now_ms(void) { return rd__now_ns() / 1000000; }

enum { L_RUNNING, L_WAITING, L_UP, L_FAILED, L_GONE };
static const char *const launch_state[] = {"running its launch command", "waiting for the node to join", "up",
                                           "failed", "gone"};

typedef struct launch {
  uint32_t id;              /* RAYDIST_LAUNCH_ID, and the node's raydist.io/launch-id */
  int type;
  int pid;                  /* its launch command while it runs (0: ended) */
  uint64_t started_ms;
  uint64_t wall_ms;         /* started_ms as wall-clock time, which a restarted process can use */
  int state;
  uint32_t node;            /* the node once it joined */
  char ip[64];
  char why[200];            /* L_FAILED: why; L_GONE: how it left */
  struct launch *next;
} launch;

static struct {
  rd_as_config cfg;
  rd_gcs *gcs;
  char address[160], token[256];
  launch *launches;         /* newest first */
  uint32_t next_id;
  uint64_t launched, failed, drained, terminated;
  volatile sig_atomic_t stop;
  int bad_config_warned;
  int bad_request_warned;
  char *saved;              /* the state text last written to the KV store (state_save) */
  int fails_in_row[RD_AS_MAX_TYPES];     /* launches of each kind that failed since one joined */
  uint64_t backoff_until[RD_AS_MAX_TYPES];   /* no launch of the kind before then (now_ms) */
} A;

/* A launch of kind t failed: the next waits 2 s, doubling to 5 minutes. */
static void type_failed(int t) {
  int k = A.fails_in_row[t]++;
  uint64_t wait = k >= 8 ? 300000 : 2000ull << k;
  if (wait > 300000) wait = 300000;
  A.backoff_until[t] = now_ms() + wait;
  rd__log(RD_LOG_WARN, "node type '%s': %d launch%s failed in a row; the next in %.0f s", A.cfg.types[t].name,
          k + 1, k ? "es" : "", wait / 1e3);
}

/* A cluster event (source AUTOSCALER, as Ray's autoscaler's "Adding 1
 * node(s) of type ...").  Best effort: a GCS that does not answer costs
 * the event, not the round. */
static void as_event(const char *severity, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void as_event(const char *severity, const char *fmt, ...) {
  char msg[RD_GCS_EVENT_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  rd_gcs_cluster_event e = {.source = "AUTOSCALER", .severity = severity, .message = msg, .pid = (int)getpid()};
  if (rd_gcs_event_add(A.gcs, &e, NULL) != 0)
    rd__log(RD_LOG_WARN, "cannot record a cluster event (%s): %s", rd_gcs_last_error(), msg);
}

/* Launch l failed, for the reason in l->why. */
static void launch_fail(launch *l) {
  l->state = L_FAILED;
  A.failed++;
  rd__log(RD_LOG_ERROR, "launch %u (type '%s') failed: %s", l->id, A.cfg.types[l->type].name, l->why);
  as_event("ERROR", "Launch %u of a node of type %s failed: %s.", l->id, A.cfg.types[l->type].name, l->why);
  type_failed(l->type);
}

/* sh -c cmd with the environment plus vars (NAME=VALUE, NULL-ended; they
 * replace any of the same name); its output goes to ours (the log). */
static int run_sh(const char *cmd, char **vars) {
  size_t n = 0, nv = 0;
  while (environ[n]) n++;
  while (vars[nv]) nv++;
  char **env = calloc(n + nv + 1, sizeof(char *));
  if (!env) return -1;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int dup = 0;
    for (size_t j = 0; j < nv && !dup; j++) {
      size_t len = strcspn(vars[j], "=");
      dup = !strncmp(environ[i], vars[j], len + 1);
    }
    if (!dup) env[k++] = environ[i];
  }
  for (size_t j = 0; j < nv; j++) env[k++] = vars[j];
  env[k] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
  pid_t pid;
  int r = posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  if (r != 0) {
    rd__log(RD_LOG_ERROR, "cannot run /bin/sh: %s", strerror(r));
    return -1;
  }
  return (int)pid;
}

static void launch_start(int type) {
  const rd_as_type_conf *t = &A.cfg.types[type];
  launch *l = calloc(1, sizeof(*l));
  if (!l) return;
  l->id = A.next_id++;
  l->type = type;
  l->started_ms = now_ms();
  l->wall_ms = rd__wall_ms();
  char v_addr[200], v_tok[300], v_type[100], v_id[64];
  snprintf(v_addr, sizeof(v_addr), "RAYDIST_ADDRESS=%s", A.address);
  snprintf(v_tok, sizeof(v_tok), "RAYDIST_TOKEN=%s", A.token);
  snprintf(v_type, sizeof(v_type), "RAYDIST_NODE_TYPE=%s", t->name);
  snprintf(v_id, sizeof(v_id), "RAYDIST_LAUNCH_ID=%u", l->id);
  char *vars[] = {v_addr, v_tok, v_type, v_id, NULL};
  l->pid = run_sh(t->launch, vars);
  A.launched++;
  l->next = A.launches;
  A.launches = l;
  if (l->pid < 0) {
    l->pid = 0;
    snprintf(l->why, sizeof(l->why), "its launch command could not be run");
    launch_fail(l);
  }
  rd__log(RD_LOG_WARN, "launch %u: starting a node of type '%s' (pid %d)", l->id, t->name, l->pid);
}

/* A node left (drained, or died): its type's terminate command. */
static void terminate_run(const launch *l, const rd_gcs_node *n) {
  const rd_as_type_conf *t = &A.cfg.types[l->type];
  if (!t->terminate[0]) return;
  char v_type[100], v_id[64], v_ip[100], v_idx[64];
  snprintf(v_type, sizeof(v_type), "RAYDIST_NODE_TYPE=%s", t->name);
  snprintf(v_id, sizeof(v_id), "RAYDIST_LAUNCH_ID=%u", l->id);
  snprintf(v_ip, sizeof(v_ip), "RAYDIST_NODE_IP=%s", n->ip);
  snprintf(v_idx, sizeof(v_idx), "RAYDIST_NODE_INDEX=%u", n->index);
  char *vars[] = {v_type, v_id, v_ip, v_idx, NULL};
  if (run_sh(t->terminate, vars) > 0) A.terminated++;
}

/* Reaps launch and terminate commands; a launch command that failed fails
 * its launch. */
static void reap(void) {
  int st;
  pid_t pid;
  while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
    for (launch *l = A.launches; l; l = l->next) {
      if (l->pid != pid) continue;
      l->pid = 0;
      if (l->state != L_RUNNING) break;
      if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        l->state = L_WAITING;
      } else {
        snprintf(l->why, sizeof(l->why), "its launch command %s %d", WIFEXITED(st) ? "exited" : "was killed by signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        launch_fail(l);
      }
      break;
    }
  }
}

static int type_of(const rd_gcs_node *n) {
  char v[80];
  rd_labels_value(n->labels, RD_LABEL_NODE_TYPE, v, sizeof(v));
  for (size_t i = 0; v[0] && i < A.cfg.ntypes; i++)
    if (!strcmp(A.cfg.types[i].name, v)) return (int)i;
  return -1;
}

static uint32_t launch_id_of(const rd_gcs_node *n) {
  char v[32];
  rd_labels_value(n->labels, RD_LABEL_LAUNCH_ID, v, sizeof(v));
  return v[0] ? (uint32_t)strtoul(v, NULL, 10) : 0;
}

/* Matches launches to the nodes that joined, and notices those that left
 * (their terminate command runs) or never came (launch_timeout). */
static void launches_update(const rd_gcs_node *nodes, size_t nn) {
  uint64_t now = now_ms();
  for (launch *l = A.launches; l; l = l->next) {
    if (l->state == L_FAILED || l->state == L_GONE) continue;
    const rd_gcs_node *mine = NULL;
    for (size_t i = 0; i < nn; i++)
      if (launch_id_of(&nodes[i]) == l->id && type_of(&nodes[i]) == l->type) mine = &nodes[i];
    if (mine && mine->state == RD_GCS_NODE_ALIVE && l->state != L_UP) {
      l->state = L_UP;
      l->node = mine->index;
      snprintf(l->ip, sizeof(l->ip), "%s", mine->ip);
      rd__log(RD_LOG_WARN, "launch %u: node %u (%s) of type '%s' joined after %.1f s", l->id, mine->index, mine->ip,
              A.cfg.types[l->type].name, (now - l->started_ms) / 1e3);
      A.fails_in_row[l->type] = 0;
      A.backoff_until[l->type] = 0;
    } else if (mine && mine->state != RD_GCS_NODE_ALIVE) {
      l->state = L_GONE;
      snprintf(l->why, sizeof(l->why), "%s", mine->death_reason);
      rd__log(RD_LOG_WARN, "launch %u: node %u of type '%s' left: %s", l->id, mine->index, A.cfg.types[l->type].name,
              mine->death_reason);
      if (strstr(mine->death_reason, "drained: ")) A.drained++;   /* let go: it left because it was asked */
      terminate_run(l, mine);
    } else if (!mine && now - l->started_ms > A.cfg.launch_timeout_ms) {
      snprintf(l->why, sizeof(l->why), "its node did not join within %llu s",
               (unsigned long long)(A.cfg.launch_timeout_ms / 1000));
      launch_fail(l);
    }
  }
  /* a live node of a known type with a launch id no live launch names */
  for (size_t i = 0; i < nn; i++) {
    const rd_gcs_node *n = &nodes[i];
    int t = type_of(n);
    uint32_t id = launch_id_of(n);
    if (n->state != RD_GCS_NODE_ALIVE || t < 0 || id == 0) continue;
    const launch *l = A.launches;
    while (l && !(l->id == id && l->type == t && l->state == L_UP)) l = l->next;
    if (l) continue;
    launch *a = calloc(1, sizeof(*a));
    if (!a) break;
    *a = (launch){.id = id, .type = t, .started_ms = now, .wall_ms = rd__wall_ms(), .state = L_UP, .node = n->index,
                  .next = A.launches};
    snprintf(a->ip, sizeof(a->ip), "%s", n->ip);
    A.launches = a;
    if (id >= A.next_id) A.next_id = id + 1;
    A.fails_in_row[t] = 0;   /* its kind's launches work, if slowly */
    A.backoff_until[t] = 0;
    rd__log(RD_LOG_WARN, "launch %u: node %u (%s) of type '%s' adopted: no launch of this process names it", id,
            n->index, n->ip, A.cfg.types[t].name);
  }
  /* keep the last 64 ended launches for the status */
  int kept = 0;
  for (launch **pp = &A.launches; *pp;) {
    launch *l = *pp;
    int ended = (l->state == L_FAILED || l->state == L_GONE) && !l->pid;
    if (ended && ++kept > 64) {
      *pp = l->next;
      free(l);
    } else {
      pp = &l->next;
    }
  }
}

/* ------------------------------------------------------------ its state in the GCS */

/* The state text: "next ID launched N failed N drained N\n", then a line
 * "ID TYPE STATE WALL_MS NODE IP" for each launch whose node has not left
 * (STATE 1: not joined yet, 2: up; IP "-" before it joined), newest
 * first. */
static void state_save(void) {
  rd__mbuf b = {0};
  rd__mbuf_printf(&b, "next %u launched %llu failed %llu drained %llu\n", A.next_id, (unsigned long long)A.launched,
                  (unsigned long long)A.failed, (unsigned long long)A.drained);
  for (const launch *l = A.launches; l; l = l->next)
    if (l->state == L_RUNNING || l->state == L_WAITING || l->state == L_UP)
      rd__mbuf_printf(&b, "%u %s %d %llu %u %s\n", l->id, A.cfg.types[l->type].name, l->state == L_UP ? 2 : 1,
                      (unsigned long long)l->wall_ms, l->node, l->ip[0] ? l->ip : "-");
  if (b.p && !b.oom && !(A.saved && !strcmp(A.saved, b.p))) {
    if (rd_gcs_kv_put(A.gcs, RD_AS_KV_NS, RD_AS_KV_STATE, b.p, b.len, 1) == 0) {
      free(A.saved);
      A.saved = b.p;
      b.p = NULL;
    } else {
      rd__log(RD_LOG_WARN, "cannot keep the launches in the GCS: %s", rd_gcs_last_error());
    }
  }
  free(b.p);
}

/* A restarted process: the state an earlier one saved.  Its launches go on
 * as if this process had made them (a launch command that was running is
 * waited for as not joined yet, its launch_timeout counted from when it
 * started). */
static void state_load(void) {
  void *v = NULL;
  size_t len = 0;
  if (rd_gcs_kv_get(A.gcs, RD_AS_KV_NS, RD_AS_KV_STATE, &v, &len) != 0 || !len) {
    free(v);
    return;
  }
  char *text = malloc(len + 1);
  if (!text) {
    free(v);
    return;
  }
  memcpy(text, v, len);
  text[len] = 0;
  free(v);
  unsigned next;
  unsigned long long launched, failed, drained;
  int nl = 0, bad = 0;
  launch **tail = &A.launches;
  char *save = NULL;
  char *line = strtok_r(text, "\n", &save);
  if (!line || sscanf(line, "next %u launched %llu failed %llu drained %llu", &next, &launched, &failed,
                      &drained) != 4) {
    rd__log(RD_LOG_ERROR, "the launches an earlier autoscaler kept are unreadable: starting afresh");
    free(text);
    return;
  }
  if (next > A.next_id) A.next_id = next;
  A.launched = launched;
  A.failed = failed;
  A.drained = drained;
  uint64_t wall = rd__wall_ms(), mono = now_ms();
  while ((line = strtok_r(NULL, "\n", &save))) {
    unsigned id, node;
    int st;
    unsigned long long at;
    char type[64], ip[64];
    if (sscanf(line, "%u %63s %d %llu %u %63s", &id, type, &st, &at, &node, ip) != 6 || (st != 1 && st != 2)) {
      bad++;
      continue;
    }
    int t = -1;
    for (size_t i = 0; i < A.cfg.ntypes; i++)
      if (!strcmp(A.cfg.types[i].name, type)) t = (int)i;
    if (t < 0) {
      rd__log(RD_LOG_WARN, "launch %u: type '%s' is not in the config now; forgotten", id, type);
      continue;
    }
    launch *l = calloc(1, sizeof(*l));
    if (!l) break;
    uint64_t ago = wall > at ? wall - at : 0;
    *l = (launch){.id = id, .type = t, .wall_ms = at, .started_ms = mono > ago ? mono - ago : 0,
                  .state = st == 2 ? L_UP : L_WAITING, .node = node};
    if (strcmp(ip, "-")) snprintf(l->ip, sizeof(l->ip), "%s", ip);
    if (id >= A.next_id) A.next_id = id + 1;
    *tail = l;
    tail = &l->next;
    nl++;
  }
  if (bad) rd__log(RD_LOG_ERROR, "%d unreadable launch records left out", bad);
  rd__log(RD_LOG_WARN, "picked up %d launch%s from an earlier autoscaler (%llu started, %llu failed, %llu let go); "
          "the next launch id is %u", nl, nl == 1 ? "" : "es", launched, failed, drained, A.next_id);
  free(text);
}

/* ------------------------------------------------------------ one round */

typedef struct round_state {
  rd_gcs_node *nodes;
  size_t nn;
  rd_gcs_node_load *load;
  size_t nl;
  rd_resources *req;        /* rd_request_resources's bundles */
  size_t nreq;
  rd_as_plan plan;
  char demand_text[1024];
} round_state;

/* The room rd_request_resources asks for (the KV store): its bundles in
 * *out (malloc'ed, NULL when none).  A line that does not parse (no client
 * writes one) is left out, and said once. */
static size_t requested_read(rd_resources **out) {
  *out = NULL;
  void *v = NULL;
  size_t len = 0;
  if (rd_gcs_kv_get(A.gcs, RD_AS_KV_NS, RD_AS_KV_REQUESTED, &v, &len) != 0 || !len) {
    free(v);
    return 0;
  }
  char *text = malloc(len + 1);
  size_t n = 0, cap = 0;
  if (text) {
    memcpy(text, v, len);
    text[len] = 0;
    for (const char *p = text; *p && n < RD_AS_REQ_MAX;) {
      size_t k = strcspn(p, "\n");
      char line[1024], err[256];
      snprintf(line, sizeof(line), "%.*s", (int)(k < sizeof(line) ? k : sizeof(line) - 1), p);
      p += k + (p[k] == '\n');
      rd_resources r;
      if (!*line) continue;
      if (parse_res(line, &r, err, sizeof(err)) != 0) {
        if (!A.bad_request_warned++) rd__log(RD_LOG_WARN, "requested room: '%.80s': %s", line, err);
        continue;
      }
      if (n == cap) {
        size_t nc = cap ? cap * 2 : 16;
        rd_resources *g = realloc(*out, nc * sizeof(*g));
        if (!g) break;
        *out = g;
        cap = nc;
      }
      (*out)[n++] = r;
    }
  }
  free(text);
  free(v);
  return n;
}

static const rd_gcs_node_load *load_of(const round_state *s, uint32_t index) {
  for (size_t i = 0; i < s->nl; i++)
    if (s->load[i].index == index) return &s->load[i];
  return NULL;
}

static void status_write(const round_state *s, const uint32_t *alive, const uint32_t *starting) {
  rd__mbuf b = {0};
  rd__mbuf_printf(&b, "autoscaler: %zu node type%s, a round every %llu ms; idle nodes go after %llu s",
                  A.cfg.ntypes, A.cfg.ntypes == 1 ? "" : "s", (unsigned long long)A.cfg.interval_ms,
                  (unsigned long long)(A.cfg.idle_timeout_ms / 1000));
  if (A.cfg.upscaling_speed > 0) rd__mbuf_printf(&b, "; upscaling speed %g", A.cfg.upscaling_speed);
  rd__mbuf_printf(&b, "\n");
  for (size_t t = 0; t < A.cfg.ntypes; t++) {
    char r[256];
    rd_res_format(&A.cfg.types[t].res, r, sizeof(r));
    rd__mbuf_printf(&b, "  type %s: %u alive, %u starting (min %d, max %d) %s", A.cfg.types[t].name, alive[t],
                    starting[t], A.cfg.types[t].min_workers, A.cfg.types[t].max_workers, r);
    if (A.cfg.types[t].idle_timeout_ms)
      rd__mbuf_printf(&b, "; idle nodes go after %llu s", (unsigned long long)(A.cfg.types[t].idle_timeout_ms / 1000));
    rd__mbuf_printf(&b, "\n");
    uint64_t now = now_ms();
    if (now < A.backoff_until[t])
      rd__mbuf_printf(&b, "    %d launch%s failed in a row: the next in %.0f s\n", A.fails_in_row[t],
                      A.fails_in_row[t] == 1 ? "" : "es", (A.backoff_until[t] - now) / 1e3);
  }
  rd__mbuf_printf(&b, "  launches: %llu started, %llu failed; %llu nodes let go\n", (unsigned long long)A.launched,
                  (unsigned long long)A.failed, (unsigned long long)A.drained);
  rd__mbuf_printf(&b, "  waiting: %s\n", s->demand_text[0] ? s->demand_text : "nothing");
  if (s->nreq)
    rd__mbuf_printf(&b, "  requested: %zu bundle%s (rd_request_resources)%s\n", s->nreq, s->nreq == 1 ? "" : "s",
                    s->plan.req_unmet ? ", some more than the node types can hold" : "");
  if (s->plan.capped)
    rd__mbuf_printf(&b, "  %u waiting request%s could run on a node type at its max_workers\n", s->plan.capped,
                    s->plan.capped == 1 ? "" : "s");
  if (s->plan.infeasible)
    rd__mbuf_printf(&b, "  %u waiting request%s no node type can run\n", s->plan.infeasible,
                    s->plan.infeasible == 1 ? "" : "s");
  int shown = 0;
  for (const launch *l = A.launches; l && shown < 8; l = l->next, shown++) {
    if (l->state == L_UP)
      rd__mbuf_printf(&b, "  launch %u (%s): up, node %u (%s)\n", l->id, A.cfg.types[l->type].name, l->node, l->ip);
    else
      rd__mbuf_printf(&b, "  launch %u (%s): %s%s%s\n", l->id, A.cfg.types[l->type].name, launch_state[l->state],
                      l->why[0] ? ": " : "", l->why);
  }
  if (b.p && !b.oom) (void)rd_gcs_kv_put(A.gcs, RD_AS_KV_NS, RD_AS_KV_STATUS, b.p, b.len, 1);
  free(b.p);
}

static void round_once(void) {
  round_state s;
  memset(&s, 0, sizeof(s));
  reap();
  uint32_t alive[RD_AS_MAX_TYPES] = {0}, starting[RD_AS_MAX_TYPES] = {0};
  if (rd_gcs_get_nodes(A.gcs, &s.nodes, &s.nn, NULL) != 0 || rd_gcs_get_load(A.gcs, &s.load, &s.nl) != 0) {
    rd__log(RD_LOG_WARN, "cannot read the cluster from the GCS: %s", rd_gcs_last_error());
    goto out;
  }
  launches_update(s.nodes, s.nn);

  /* the policy's inputs: live nodes, then launches not in yet */
  size_t cap = s.nn + 256;
  rd_as_node *pn = calloc(cap, sizeof(*pn));
  uint32_t *pidx = calloc(cap, sizeof(*pidx));
  rd_resources *work = calloc(2 * cap, sizeof(*work));
  unsigned char *drain = calloc(cap, 1);
  rd_as_demand *dem = calloc(s.nl * RD_GCS_DEMAND_MAX + 1, sizeof(*dem));
  if (!pn || !pidx || !work || !drain || !dem) goto free_out;
  size_t np = 0, nd = 0;
  for (size_t i = 0; i < s.nn; i++) {
    const rd_gcs_node *n = &s.nodes[i];
    if (n->state != RD_GCS_NODE_ALIVE) continue;
    const rd_gcs_node_load *ld = load_of(&s, n->index);
    int t = type_of(n);
    pn[np] = (rd_as_node){.index = n->index, .type = t, .avail = n->avail, .total = n->total, .labels = n->labels,
                          .idle_ms = ld ? ld->idle_ms : 0, .draining = ld && ld->drain[0]};
    if (t >= 0) alive[t]++;
    pidx[np++] = n->index;
  }
  for (const launch *l = A.launches; l && np < cap; l = l->next)
    if (l->state == L_RUNNING || l->state == L_WAITING) {
      pn[np] = (rd_as_node){.type = l->type, .starting = 1};
      pidx[np++] = 0;
      starting[l->type]++;
    }
  size_t tl = 0;
  for (size_t i = 0; i < s.nl; i++)
    for (size_t k = 0; k < s.load[i].ndemand; k++) {
      const rd_gcs_demand *d = &s.load[i].demand[k];
      dem[nd++] = (rd_as_demand){.shape = d->shape, .sel = d->sel, .count = d->count, .spread_group = d->spread_group,
                                 .avoid = d->avoid, .navoid = d->navoid};
      if (tl < sizeof(s.demand_text) - 200) {
        char r[160];
        rd_res_format(&d->shape, r, sizeof(r));
        tl += (size_t)snprintf(s.demand_text + tl, sizeof(s.demand_text) - tl, "%s%s x %u%s%s%s on node %u",
                               tl ? "; " : "", r, d->count, d->sel[0] ? " (selector '" : "", d->sel,
                               d->sel[0] ? "')" : "", s.load[i].index);
      }
    }
  rd_as_type pt[RD_AS_MAX_TYPES];
  uint64_t now = now_ms();
  for (size_t t = 0; t < A.cfg.ntypes; t++) {
    pt[t] = (rd_as_type){.name = A.cfg.types[t].name, .res = A.cfg.types[t].res, .labels = A.cfg.types[t].labels,
                         .min_workers = A.cfg.types[t].min_workers, .max_workers = A.cfg.types[t].max_workers,
                         .idle_timeout_ms = A.cfg.types[t].idle_timeout_ms};
    if (now < A.backoff_until[t]) {   /* launches failed: none for now (what there is counts as the most) */
      int have = (int)(alive[t] + starting[t]);
      if (pt[t].max_workers > have) pt[t].max_workers = have;
      if (pt[t].min_workers > have) pt[t].min_workers = have;
    }
  }
  rd_as_opts o = {.idle_timeout_ms = A.cfg.idle_timeout_ms, .max_launch = A.cfg.max_launch,
                  .upscaling_speed = A.cfg.upscaling_speed};
  s.nreq = requested_read(&s.req);
  rd_as_plan_round(pt, A.cfg.ntypes, pn, np, dem, nd, s.req, s.nreq, &o, work, drain, &s.plan);
  if (s.plan.infeasible && !A.bad_config_warned) {
    char r[160];
    rd_res_format(&dem[s.plan.infeasible_example].shape, r, sizeof(r));
    rd__log(RD_LOG_WARN, "%u waiting requests no node type can run, e.g. %s%s%s", s.plan.infeasible, r,
            dem[s.plan.infeasible_example].sel[0] ? " with selector " : "", dem[s.plan.infeasible_example].sel);
    as_event("WARNING", "No node type can run %u waiting request%s, e.g. %s%s%s: add a node type that can.",
             s.plan.infeasible, s.plan.infeasible == 1 ? "" : "s", r,
             dem[s.plan.infeasible_example].sel[0] ? " with selector " : "", dem[s.plan.infeasible_example].sel);
    A.bad_config_warned = 1;
  }

  /* carry it out */
  for (size_t t = 0; t < A.cfg.ntypes; t++) {
    if (s.plan.launch[t] > 0)
      as_event("INFO", "Adding %d node(s) of type %s.", s.plan.launch[t], A.cfg.types[t].name);
    for (int k = 0; k < s.plan.launch[t]; k++) {
      launch_start((int)t);
      starting[t]++;
    }
  }
  state_save();   /* before anything slow: a process started now must not reuse these ids */
  for (size_t i = 0; i < np; i++) {
    const rd_gcs_node_load *ld = pidx[i] ? load_of(&s, pidx[i]) : NULL;
    /* asked before and still idle: asked again (a DrainNode stands 3 s) */
    int again = pn[i].draining && pn[i].idle_ms && ld;
    if (!drain[i] && !again) continue;
    char why[160];
    snprintf(why, sizeof(why), "idle for %.0f s (autoscaler, type '%s')", pn[i].idle_ms / 1e3,
             A.cfg.types[pn[i].type < 0 ? 0 : pn[i].type].name);
    if (rd_gcs_drain_node(A.gcs, pidx[i], why) == 0 && drain[i]) {   /* counted once it has left (a busy one stays) */
      rd__log(RD_LOG_WARN, "asked node %u to leave: %s", pidx[i], why);
      if (!pn[i].draining)
        as_event("INFO", "Removing 1 nodes of type %s (node %u, idle for %.0f s).",
                 A.cfg.types[pn[i].type < 0 ? 0 : pn[i].type].name, pidx[i], pn[i].idle_ms / 1e3);
    }
  }
  /* the node types, with their counts, for the nodes' placement */
  rd_gcs_node_type nt[RD_AS_MAX_TYPES];
  for (size_t t = 0; t < A.cfg.ntypes; t++) {
    memset(&nt[t], 0, sizeof(nt[t]));
    snprintf(nt[t].name, sizeof(nt[t].name), "%s", A.cfg.types[t].name);
    nt[t].res = A.cfg.types[t].res;
    snprintf(nt[t].labels, sizeof(nt[t].labels), "%s", A.cfg.types[t].labels);
    nt[t].max_workers = (uint32_t)A.cfg.types[t].max_workers;
    nt[t].workers = alive[t] + starting[t];
  }
  if (rd_gcs_set_node_types(A.gcs, nt, A.cfg.ntypes) != 0)
    rd__log(RD_LOG_WARN, "cannot send the node types to the GCS: %s", rd_gcs_last_error());
  state_save();
  status_write(&s, alive, starting);
free_out:
  free(pn);
  free(pidx);
  free(work);
  free(drain);
  free(dem);
out:
  free(s.nodes);
  free(s.load);
  free(s.req);
}

/* ------------------------------------------------------------ the command */

static void on_signal(int sig) {
  (void)sig;
  A.stop = 1;
}

static void usage(FILE *f) {
  fprintf(f, "usage: raydist autoscaler --address IP:PORT --token-file PATH --config FILE [--ready-fd FD] "
             "[--log-level L]\n"
             "                          [--pid-file PATH] [--supervise [--log-file F]]  (restarted by a keeper "
             "when it dies)\n"
             "       (started by `raydist start --head --autoscaling-config FILE`; docs/autoscaler.md)\n");
}

int rd__autoscaler_cli(int argc, char **argv) {
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--supervise")) {
      static const rd_keeper_conf kc = {.role = "autoscaler"};
      return rd__keeper(argc, argv, &kc);
    }
  rd__log_init("autoscaler");
  const char *address = NULL, *token_file = NULL, *config = NULL, *pid_file = NULL;
  int ready_fd = -1;
  static const struct option lo[] = {{"address", 1, 0, 'a'},  {"token-file", 1, 0, 't'}, {"config", 1, 0, 'c'},
                                     {"ready-fd", 1, 0, 'r'}, {"log-level", 1, 0, 'l'},  {"help", 0, 0, 'h'},
                                     {"pid-file", 1, 0, 'p'}, {0, 0, 0, 0}};
  int ch;
  optind = 2;
  while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    switch (ch) {
      case 'a': address = optarg; break;
      case 't': token_file = optarg; break;
      case 'c': config = optarg; break;
      case 'p': pid_file = optarg; break;
      case 'r': ready_fd = atoi(optarg); break;
      case 'l': rd__log_set_level(atoi(optarg)); break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (!address || !token_file || !config) {
    usage(stderr);
    return 2;
  }
  char err[512];
  if (rd__as_config_load(config, &A.cfg, err, sizeof(err)) != 0) {
    rd__log(RD_LOG_ERROR, "%s", err);
    return 2;
  }
  if (rd__read_line(token_file, A.token, sizeof(A.token)) != 0 || !A.token[0]) {
    rd__log(RD_LOG_ERROR, "cannot read the token file %s", token_file);
    return 1;
  }
  snprintf(A.address, sizeof(A.address), "%s", address);
  int r = rd_gcs_connect(address, A.token, 10000, &A.gcs, err, sizeof(err));
  if (r != 0) {
    rd__log(RD_LOG_ERROR, "cannot reach the GCS at %s: %s", address, err);
    return 1;
  }
  if (pid_file && rd__write_num_file(pid_file, (int)getpid()) != 0) {
    rd__log(RD_LOG_ERROR, "cannot write the pid file %s: %s", pid_file, strerror(errno));
    return 1;
  }
  /* launch ids go on from the highest any node in the table has, or an
   * earlier autoscaler gave */
  rd_gcs_node *nodes = NULL;
  size_t nn = 0;
  A.next_id = 1;
  if (rd_gcs_get_nodes(A.gcs, &nodes, &nn, NULL) == 0)
    for (size_t i = 0; i < nn; i++)
      if (launch_id_of(&nodes[i]) >= A.next_id) A.next_id = launch_id_of(&nodes[i]) + 1;
  free(nodes);
  state_load();
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  rd__log(RD_LOG_WARN, "autoscaler: %zu node types, GCS %s, config %s", A.cfg.ntypes, address, config);
  round_once();
  if (ready_fd >= 0) {
    if (write(ready_fd, "R", 1) != 1) rd__log(RD_LOG_WARN, "ready fd: %s", strerror(errno));
    close(ready_fd);
  }
  while (!A.stop) {
    uint64_t until = now_ms() + A.cfg.interval_ms;
    while (!A.stop && now_ms() < until) {
      struct timespec ts = {0, 20 * 1000000};
      nanosleep(&ts, NULL);
    }
    if (!A.stop) round_once();
  }
  /* nodes stop waiting for kinds nobody will start */
  (void)rd_gcs_set_node_types(A.gcs, NULL, 0);
  (void)rd_gcs_kv_del(A.gcs, RD_AS_KV_NS, RD_AS_KV_STATUS);
  rd_gcs_close(A.gcs);
  while (A.launches) {
    launch *l = A.launches;
    A.launches = l->next;
    free(l);
  }
  free(A.saved);
  rd__log(RD_LOG_WARN, "autoscaler stopped");
  return 0;
}
