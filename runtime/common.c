/* runtime/common.c - resource strings and resource messages. */
#include "common.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "conn.h"
#include "raydist/error.h"
#include "log.h"

static char *res_trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  return s;
}

int rd__res_parse_spec(const char *spec, rd_resources *r, char *err, size_t errlen) {
  memset(r, 0, sizeof(*r));
  char buf[1024], custom[1024] = "";
  if (strlen(spec) >= sizeof(buf)) {
    snprintf(err, errlen, "resources: longer than %zu bytes", sizeof(buf) - 1);
    return RD_EINVAL;
  }
  snprintf(buf, sizeof(buf), "%s", spec);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq) {
      snprintf(err, errlen, "resources: '%s' is not name=amount", res_trim(tok));
      return RD_EINVAL;
    }
    *eq = 0;
    char *name = res_trim(tok), *val = res_trim(eq + 1), *end;
    double v = strtod(val, &end);
    if (!*val || *end || !(v >= 0) || v > 9e18) {   /* NaN too */
      snprintf(err, errlen, "resources: '%s' for %s is not a number >= 0", val, name);
      return RD_EINVAL;
    }
    int64_t *dst = !strcmp(name, "CPU") ? &r->cpu : !strcmp(name, "GPU") ? &r->gpu : NULL;
    if (!strcmp(name, "memory")) {
      r->memory = (int64_t)v;
    } else if (dst) {
      if (rd_res_from_double(v, dst) != 0) {
        snprintf(err, errlen, "resources: %s=%s is not an amount (whole above 1)", name, val);
        return RD_EINVAL;
      }
    } else {
      size_t n = strlen(custom);
      snprintf(custom + n, sizeof(custom) - n, "%s%s=%s", n ? "," : "", name, val);
    }
  }
  char why[200] = "";
  if (custom[0] && rd__res_parse_custom(r, custom, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "resources: %s", why);
    return RD_EINVAL;
  }
  return 0;
}

int rd__res_parse_custom(rd_resources *r, const char *spec, char *err, int errlen) {
  if (!spec || !*spec) return 0;
  char buf[512];
  if (strlen(spec) >= sizeof(buf)) {
    if (err) snprintf(err, (size_t)errlen, "resource string too long");
    return RD_EINVAL;
  }
  strcpy(buf, spec);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq || eq == tok) {
      if (err) snprintf(err, (size_t)errlen, "resource '%s' is not name=amount", tok);
      return RD_EINVAL;
    }
    *eq = 0;
    char *end = NULL;
    double q = strtod(eq + 1, &end);
    int64_t fx;
    if (!end || *end || end == eq + 1 || rd_res_from_double(q, &fx) != 0) {
      if (err) snprintf(err, (size_t)errlen, "resource '%s' has a bad amount '%s'", tok, eq + 1);
      return RD_EINVAL;
    }
    if (strlen(tok) >= RD_RES_NAME_MAX) {
      if (err) snprintf(err, (size_t)errlen, "resource name '%s' is too long", tok);
      return RD_EINVAL;
    }
    if (rd_res_get_custom(r, tok) != 0) {
      if (err) snprintf(err, (size_t)errlen, "resource '%s' given twice", tok);
      return RD_EINVAL;
    }
    if (rd_res_set_custom(r, tok, fx) != 0) {
      if (err) snprintf(err, (size_t)errlen, "too many custom resources");
      return RD_EINVAL;
    }
  }
  return 0;
}

void rd__res_to_msg(const rd_resources *r, rd__res_msg *out) {
  rd__resources__init(&out->msg);
  out->msg.cpu = r->cpu;
  out->msg.gpu = r->gpu;
  out->msg.memory = r->memory;
  out->msg.n_custom = (size_t)r->ncustom;
  out->msg.custom = out->customp;
  for (int i = 0; i < r->ncustom; i++) {
    rd__custom__init(&out->custom[i]);
    out->custom[i].name = (char *)r->custom[i].name;
    out->custom[i].amount = r->custom[i].amount;
    out->customp[i] = &out->custom[i];
  }
}

/* Amounts (a node's total, or what is free now, say 1.99 CPUs) need only be
 * non-negative; requests above one unit must also be whole. */
static int res_copy(const Rd__Resources *m, rd_resources *out);

int rd__res_amounts_from_msg(const Rd__Resources *m, rd_resources *out) {
  int r = res_copy(m, out);
  if (r != 0) return r;
  if (out->cpu < 0 || out->gpu < 0 || out->memory < 0) return RD_EINVAL;
  for (int i = 0; i < out->ncustom; i++)
    if (out->custom[i].amount < 0 || !out->custom[i].name[0]) return RD_EINVAL;
  return 0;
}

int rd__res_from_msg(const Rd__Resources *m, rd_resources *out) {
  int r = res_copy(m, out);
  return r != 0 ? r : rd_res_validate(out);
}

static int res_copy(const Rd__Resources *m, rd_resources *out) {
  memset(out, 0, sizeof(*out));
  if (!m) return 0;
  if (m->n_custom > RD_RES_MAX_CUSTOM) return RD_EINVAL;
  out->cpu = m->cpu;
  out->gpu = m->gpu;
  out->memory = m->memory;
  for (size_t i = 0; i < m->n_custom; i++) {
    if (!m->custom[i]->name || strlen(m->custom[i]->name) >= RD_RES_NAME_MAX) return RD_EINVAL;
    strcpy(out->custom[i].name, m->custom[i]->name);
    out->custom[i].amount = m->custom[i]->amount;
  }
  out->ncustom = (int)m->n_custom;
  return 0;
}

void rd__session_root(char *root, size_t len) {
  const char *base = getenv("RAYDIST_TMPDIR");
  if (!base || !*base) base = "/tmp";
  snprintf(root, len, "%s/raydist-%u", base, (unsigned)getuid());
}

int rd__session_root_make(char *root, size_t len, size_t room, int *code, char *err, size_t errlen) {
  rd__session_root(root, len);
  struct sockaddr_un sa;
  size_t n = strlen(root);
  *code = RD_EINVAL;
  if (n + 1 >= len || n + room >= sizeof(sa.sun_path)) {
    snprintf(err, errlen, "the session directory %.200s%s would hold sockets whose paths pass the %zu bytes a Unix "
             "socket's path may have: set RAYDIST_TMPDIR to a shorter directory", root, n + 1 >= len ? "..." : "",
             sizeof(sa.sun_path) - 1);
    return -1;
  }
  *code = RD_ESYS;
  char p[256];
  snprintf(p, sizeof(p), "%s", root);
  for (char *s = p + 1; *s; s++) {   /* the parents, as mkdir -p makes them */
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
      snprintf(err, errlen, "cannot make %s: %s (RAYDIST_TMPDIR names where sessions go)", p, strerror(errno));
      return -1;
    }
    *s = '/';
  }
  if (mkdir(root, 0700) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "cannot make %s: %s", root, strerror(errno));
    return -1;
  }
  struct stat st;
  if (lstat(root, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
    snprintf(err, errlen, "%s is not a directory of this user's", root);
    return -1;
  }
  chmod(root, 0700);
  return 0;
}

int rd__write_num_file(const char *path, int v) {
  char tmp[4096];
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  fprintf(f, "%d\n", v);
  if (fclose(f) != 0 || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

int rd__write_file(const char *path, const void *p, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  const char *c = p;
  while (n) {
    ssize_t k = write(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      int e = k < 0 ? errno : EIO;
      close(fd);
      errno = e;
      return -1;
    }
    c += k;
    n -= (size_t)k;
  }
  return close(fd);
}

int rd__make_token(const char *path, size_t nbytes, char *out, size_t outlen) {
  unsigned char b[32];
  char hex[2 * sizeof(b) + 2];
  if (nbytes > sizeof(b) || (out && outlen < 2 * nbytes + 1)) return errno = EINVAL, -1;
  if (getrandom(b, nbytes, 0) != (ssize_t)nbytes) return -1;
  for (size_t i = 0; i < nbytes; i++) snprintf(hex + 2 * i, 3, "%02x", b[i]);
  hex[2 * nbytes] = '\n';
  if (rd__write_file(path, hex, 2 * nbytes + 1) != 0) return -1;
  if (out) snprintf(out, outlen, "%.*s", (int)(2 * nbytes), hex);
  return 0;
}

int rd__read_line(const char *path, char *out, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  if (!fgets(out, (int)len, f)) out[0] = 0;
  fclose(f);
  out[strcspn(out, "\r\n")] = 0;
  return 0;
}

int rd__read_kv(const char *path, const char *key, char *out, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[512];
  size_t kl = strlen(key);
  int r = -1;
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, key, kl) == 0 && line[kl] == '=') {
      line[strcspn(line, "\r\n")] = 0;
      snprintf(out, len, "%s", line + kl + 1);
      r = 0;
      break;
    }
  }
  fclose(f);
  return r;
}

void rd__rm_rf(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char p[1024];
      snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
      struct stat st;
      if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rd__rm_rf(p);
      else unlink(p);
    }
    closedir(d);
  }
  rmdir(path);
}

/* ------------------------------------------------------------ task env */

static int env_name_len(const char *v) {   /* length of NAME in "NAME=...", or -1 */
  int i = 0;
  if (!((v[0] >= 'A' && v[0] <= 'Z') || (v[0] >= 'a' && v[0] <= 'z') || v[0] == '_')) return -1;
  for (i = 1; v[i] && v[i] != '='; i++)
    if (!((v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') ||
          v[i] == '_'))
      return -1;
  return v[i] == '=' ? i : -1;
}

static int env_cmp(const void *a, const void *b) {
  const char *x = *(const char *const *)a, *y = *(const char *const *)b;
  for (;; x++, y++) {   /* by name: '=' ends it and sorts first */
    int cx = *x == '=' ? 0 : (unsigned char)*x, cy = *y == '=' ? 0 : (unsigned char)*y;
    if (cx != cy || !cx) return cx - cy;
  }
}

int rd__env_same_name(const char *a, const char *b) {
  size_t nl = strcspn(b, "=");
  return !strncmp(a, b, nl) && a[nl] == '=';
}

char *rd__env_names(const char *prefix, const char *const *vars, size_t n) {
  size_t len = strlen(prefix) + 1;
  for (size_t i = 0; i < n; i++) len += strcspn(vars[i], "=") + 1;
  char *s = malloc(len), *p = s;
  if (!s) return NULL;
  p = stpcpy(p, prefix);
  const char *first = p;
  for (size_t i = 0; i < n; i++) {
    int seen = !rd__env_settable(vars[i]);
    for (size_t k = 0; k < i && !seen; k++) seen = rd__env_same_name(vars[k], vars[i]);
    if (seen) continue;
    size_t nl = strcspn(vars[i], "=");
    if (p != first) *p++ = ',';
    memcpy(p, vars[i], nl);
    p += nl;
  }
  *p = 0;
  return s;
}

/* The runtime's own settings a task's or actor's env may set: read by the
 * worker alone (an actor's calls' lines recorded apart, src/worker.c). */
static int env_worker_setting(const char *v, int nl) {
  static const char rec[] = "RAYDIST_RECORD_ACTOR_TASK_LOGGING";
  return nl == (int)sizeof(rec) - 1 && !strncmp(v, rec, sizeof(rec) - 1);
}

int rd__env_settable(const char *v) {
  int nl = env_name_len(v);
  return nl > 0 && (strncmp(v, "RAYDIST_", 8) != 0 || env_worker_setting(v, nl)) &&
         !(nl == 20 && !strncmp(v, "CUDA_VISIBLE_DEVICES", 20));
}

int rd__env_canon(const char *const *vars, size_t n, char **out, size_t *len, char *err, size_t errlen) {
  *out = NULL;
  *len = 0;
  if (n == 0) return 0;
  if (!vars || n > RD_ENV_MAX_VARS) {
    snprintf(err, errlen, "env: %zu variables (at most %d)", n, RD_ENV_MAX_VARS);
    return RD_EINVAL;
  }
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    const char *v = vars[i];
    int nl = v ? env_name_len(v) : -1;
    if (nl < 0) {
      snprintf(err, errlen, "env entry %zu '%.60s' is not NAME=VALUE with a name of letters, digits and _", i,
               v ? v : "(null)");
      return RD_EINVAL;
    }
    if (!rd__env_settable(v)) {
      snprintf(err, errlen, "env entry %zu sets %.*s, which the runtime sets itself", i, nl, v);
      return RD_EINVAL;
    }
    total += strlen(v) + 1;
    if (total > RD_ENV_MAX_BYTES) {
      snprintf(err, errlen, "env: more than %d bytes", RD_ENV_MAX_BYTES);
      return RD_EINVAL;
    }
  }
  const char **sorted = malloc(n * sizeof(*sorted));
  char *buf = malloc(total);
  if (!sorted || !buf) {
    free(sorted);
    free(buf);
    snprintf(err, errlen, "out of memory");
    return RD_ENOMEM;
  }
  memcpy(sorted, vars, n * sizeof(*sorted));
  qsort(sorted, n, sizeof(*sorted), env_cmp);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && env_cmp(&sorted[i - 1], &sorted[i]) == 0) {
      snprintf(err, errlen, "env sets %.*s twice", env_name_len(sorted[i]), sorted[i]);
      free(sorted);
      free(buf);
      return RD_EINVAL;
    }
    size_t l = strlen(sorted[i]) + 1;
    memcpy(buf + k, sorted[i], l);
    k += l;
  }
  free(sorted);
  *out = buf;
  *len = total;
  return 0;
}

size_t rd__env_split(const char *canon, size_t len, char **out, size_t max) {
  size_t n = 0;
  for (size_t k = 0; k < len && n < max; k += strlen(canon + k) + 1) out[n++] = (char *)canon + k;
  return n;
}

char **rd__strv_pack(char *const *s, size_t n) {
  size_t bytes = (n + 1) * sizeof(char *);
  for (size_t i = 0; i < n; i++) bytes += strlen(s[i]) + 1;
  char **v = malloc(bytes);
  if (!v) return NULL;
  char *p = (char *)(v + n + 1);
  for (size_t i = 0; i < n; i++) {
    size_t l = strlen(s[i]) + 1;
    memcpy(p, s[i], l);
    v[i] = p;
    p += l;
  }
  v[n] = NULL;
  return v;
}

void rd__print_lines(FILE *f, const char *prefix, const char *data, size_t len) {
  for (size_t k = 0; k < len;) {
    const char *nl = memchr(data + k, '\n', len - k);
    size_t l = nl ? (size_t)(nl - (data + k)) : len - k;
    fputs(prefix, f);   /* the line as written, NUL bytes too */
    fwrite(data + k, 1, l, f);
    fputc('\n', f);
    k += l + 1;
  }
  fflush(f);
}

int rd__connect_within(int fd, const struct sockaddr *sa, unsigned salen, int ms) {
  if (connect(fd, sa, (socklen_t)salen) == 0) return 0;
  if (errno != EINPROGRESS && errno != EINTR) return -1;   /* EINTR: it goes on */
  uint64_t deadline = ms < 0 ? UINT64_MAX : rd__now_ns() + (uint64_t)ms * 1000000u;
  int r = rd__wait_fd(fd, POLLOUT, deadline);
  if (r != 0) {
    if (r == RD_ETIMEDOUT) errno = ETIMEDOUT;
    return -1;
  }
  int e = 0;
  socklen_t el = sizeof(e);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0) return -1;
  if (e == 0) return 0;
  errno = e;
  return -1;
}

/* One GET of rd__http_get_all on its way. */
enum { HG_CONNECTING, HG_READING, HG_DONE };
typedef struct hg_state {
  int fd, phase;
  size_t n, cap;
  char *buf;
} hg_state;

/* f failed: why, its buffer and socket let go. */
static void hg_fail(rd__http_fetch *f, hg_state *st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void hg_fail(rd__http_fetch *f, hg_state *st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->why, sizeof(f->why), fmt, ap);
  va_end(ap);
  f->rc = -1;
  free(st->buf);
  st->buf = NULL;
  if (st->fd >= 0) close(st->fd);
  st->fd = -1;
  st->phase = HG_DONE;
}

/* The socket is connected: the request, whole (a few hundred bytes fit a
 * fresh socket's buffer). */
static void hg_send(rd__http_fetch *f, hg_state *st, const char *token) {
  char req[2600];
  int rl = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s\r\n%s%s%s\r\n", f->path, f->ip,
                    token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
  if (rl < 0 || (size_t)rl >= sizeof(req) || send(st->fd, req, (size_t)rl, MSG_NOSIGNAL) != rl) {
    hg_fail(f, st, "cannot send to %s:%d", f->ip, f->port);
    return;
  }
  st->phase = HG_READING;
}

/* What st's socket has: read; at its end, the answer checked. */
static void hg_read(rd__http_fetch *f, hg_state *st, size_t max) {
  for (;;) {
    if (st->n == st->cap) {
      char *nb = st->cap < max + 4096 ? realloc(st->buf, 2 * st->cap + 1) : NULL;
      if (!nb) {
        hg_fail(f, st, "%s:%d answered more than %zu bytes", f->ip, f->port, max);
        return;
      }
      st->buf = nb;
      st->cap *= 2;
    }
    ssize_t r = recv(st->fd, st->buf + st->n, st->cap - st->n, 0);
    if (r > 0) {
      st->n += (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;   /* more later */
    if (r < 0) {
      hg_fail(f, st, "reading from %s:%d: %s", f->ip, f->port, strerror(errno));
      return;
    }
    break;   /* the end */
  }
  char *buf = st->buf;
  size_t n = st->n;
  buf[n] = 0;
  char *b = strstr(buf, "\r\n\r\n");
  if (n >= 12 && !strncmp(buf, "HTTP/1.", 7)) f->status = atoi(buf + 9);
  if (n < 12 || strncmp(buf, "HTTP/1.", 7) != 0 || !b || strncmp(buf + 8, " 200", 4) != 0) {
    int sl = (int)strcspn(buf, "\r\n");   /* its status line, and its body's first line (why, when it says) */
    const char *said = b ? b + 4 : "";
    int bl = (int)strcspn(said, "\r\n");
    hg_fail(f, st, "%s:%d answered: %.*s%s%.*s", f->ip, f->port, n ? (sl < 80 ? sl : 80) : 7, n ? buf : "nothing",
            bl ? ": " : "", bl < 200 ? bl : 200, said);
    return;
  }
  b += 4;
  f->len = n - (size_t)(b - buf);
  memmove(buf, b, f->len + 1);
  f->body = buf;
  f->rc = 0;
  st->buf = NULL;
  close(st->fd);
  st->fd = -1;
  st->phase = HG_DONE;
}

void rd__http_get_all(rd__http_fetch *v, size_t n, const char *token, int ms, size_t max) {
  hg_state *st = calloc(n ? n : 1, sizeof(*st));
  uint64_t deadline = rd__now_ns() + (uint64_t)(ms > 0 ? ms : 0) * 1000000u;
  for (size_t i = 0; i < n; i++) {
    rd__http_fetch *f = &v[i];
    f->body = NULL;
    f->len = 0;
    f->rc = -1;
    f->status = 0;
    f->why[0] = 0;
    if (!st) {
      snprintf(f->why, sizeof(f->why), "out of memory");
      continue;
    }
    st[i].fd = -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)f->port);
    if (inet_pton(AF_INET, f->ip, &a.sin_addr) != 1) {
      hg_fail(f, &st[i], "not an IPv4 address: %.64s", f->ip);
      continue;
    }
    st[i].cap = 1 << 16;
    if (!(st[i].buf = malloc(st[i].cap + 1))) {
      hg_fail(f, &st[i], "out of memory");
      continue;
    }
    st[i].fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (st[i].fd < 0) {
      hg_fail(f, &st[i], "cannot make a socket: %s", strerror(errno));
      continue;
    }
    if (connect(st[i].fd, (const struct sockaddr *)&a, sizeof(a)) == 0) hg_send(f, &st[i], token);
    else if (errno == EINPROGRESS || errno == EINTR) st[i].phase = HG_CONNECTING;
    else hg_fail(f, &st[i], "cannot connect to %s:%d: %s", f->ip, f->port, strerror(errno));
  }
  struct pollfd *pf = st && n ? malloc(n * sizeof(*pf)) : NULL;
  size_t *who = st && n ? malloc(n * sizeof(*who)) : NULL;
  for (;;) {
    size_t k = 0;
    for (size_t i = 0; pf && who && i < n; i++)
      if (st[i].phase != HG_DONE) {
        pf[k] = (struct pollfd){st[i].fd, st[i].phase == HG_CONNECTING ? POLLOUT : POLLIN, 0};
        who[k++] = i;
      }
    if (!k) break;
    uint64_t now = rd__now_ns();
    if (now >= deadline) {
      for (size_t j = 0; j < k; j++)
        hg_fail(&v[who[j]], &st[who[j]], "no whole answer from %s:%d within %d ms", v[who[j]].ip, v[who[j]].port, ms);
      break;
    }
    int r = poll(pf, (nfds_t)k, (int)((deadline - now) / 1000000u) + 1);
    if (r < 0 && errno != EINTR) {
      for (size_t j = 0; j < k; j++) hg_fail(&v[who[j]], &st[who[j]], "poll: %s", strerror(errno));
      break;
    }
    for (size_t j = 0; r > 0 && j < k; j++) {
      if (!pf[j].revents) continue;
      rd__http_fetch *f = &v[who[j]];
      hg_state *s1 = &st[who[j]];
      if (s1->phase == HG_CONNECTING) {
        int e = 0;
        socklen_t el = sizeof(e);
        if (getsockopt(s1->fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0) e = errno;
        if (e) hg_fail(f, s1, "cannot connect to %s:%d: %s", f->ip, f->port, strerror(e));
        else hg_send(f, s1, token);
      } else {
        hg_read(f, s1, max);
      }
    }
  }
  for (size_t i = 0; st && i < n; i++)
    if (st[i].phase != HG_DONE) hg_fail(&v[i], &st[i], "out of memory");
  free(pf);
  free(who);
  free(st);
}

int rd__http_get(const char *ip, int port, const char *path, const char *token, int ms, size_t max, char **body,
                 size_t *len, char *why, size_t whylen) {
  rd__http_fetch f = {.ip = ip, .port = port, .path = path};
  rd__http_get_all(&f, 1, token, ms, max);
  *body = f.body;
  *len = f.len;
  if (f.rc != 0) snprintf(why, whylen, "%s", f.why);
  return f.rc;
}

int rd__cgroups_parse(const char *spec, rd__cgroup *out, char *err, size_t errlen) {
  int n = 0;
  for (const char *p = spec; p && *p;) {
    while (*p == ' ') p++;
    const char *name = p;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-')
      p++;
    size_t len = (size_t)(p - name);
    while (*p == ' ') p++;
    if (*p != '=' || len == 0 || len > 63) {
      snprintf(err, errlen, "concurrency group '%.40s': want name=threads, the name 1..63 of [A-Za-z0-9_-]", name);
      return RD_EINVAL;
    }
    char *end;
    long t = strtol(p + 1, &end, 10);
    while (*end == ' ') end++;
    if (end == p + 1 || (*end && *end != ',') || t < 1 || t > RD_CGROUP_THREADS_MAX) {
      snprintf(err, errlen, "concurrency group '%.*s': threads must be 1..%d", (int)len, name, RD_CGROUP_THREADS_MAX);
      return RD_EINVAL;
    }
    if (len == 7 && !memcmp(name, "default", 7)) {
      snprintf(err, errlen, "concurrency group 'default' is the default one (max_concurrency threads)");
      return RD_EINVAL;
    }
    for (int i = 0; i < n; i++)
      if (strlen(out[i].name) == len && !memcmp(out[i].name, name, len)) {
        snprintf(err, errlen, "concurrency group '%.*s' given twice", (int)len, name);
        return RD_EINVAL;
      }
    if (n == RD_CGROUPS_MAX) {
      snprintf(err, errlen, "more than %d concurrency groups", RD_CGROUPS_MAX);
      return RD_EINVAL;
    }
    memcpy(out[n].name, name, len);
    out[n].name[len] = '\0';
    out[n].threads = (int)t;
    n++;
    p = *end == ',' ? end + 1 : end;
  }
  return n;
}

static const char *const task_states[RD_TS_FINISHED + 1] = {"PENDING_ARGS", "PENDING_LEASE", "RETRY_BACKOFF", "PENDING_ACTOR",
                                                            "SUBMITTED",    "RUNNING",       "FAILED",        "FINISHED"};

static const char *const actor_list_states[RD_AS_NSTATES] = {"PENDING_CREATION", "RESTARTING", "ALIVE", "DEAD"};

/* names[i] for 0 <= i < n, else "?"; and back, in any case (-1: none). */
static const char *state_name(const char *const *names, int n, int i) { return i >= 0 && i < n ? names[i] : "?"; }
static int state_parse(const char *const *names, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (!strcasecmp(s, names[i])) return i;
  return -1;
}

const char *rd__task_state_name(int state) { return state_name(task_states, RD_TS_FINISHED + 1, state); }

int rd__stack_signal(void) { return SIGRTMIN + 7; }

void rd__task_id_text(char *out, size_t len, uint32_t node, int pid, uint64_t task) {
  snprintf(out, len, "%04x-%08x-%016llx", node & 0xffffu, (unsigned)pid, (unsigned long long)task);
}
int rd__task_state_parse(const char *s) { return state_parse(task_states, RD_TS_FINISHED + 1, s); }
const char *rd__actor_list_state_name(int state) { return state_name(actor_list_states, RD_AS_NSTATES, state); }
int rd__actor_list_state_parse(const char *s) { return state_parse(actor_list_states, RD_AS_NSTATES, s); }

/* ----------------------------------------------------- application metrics */

/* s[0..n) is [a-zA-Z_][a-zA-Z0-9_]* (':' allowed too with colon). */
static int metric_ident(const char *s, size_t n, int colon) {
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    int ok = c == '_' || ((c | 32) >= 'a' && (c | 32) <= 'z') || (i && c >= '0' && c <= '9') || (colon && c == ':');
    if (!ok) return 0;
  }
  return n > 0;
}

const char *rd__metric_kind_name(int kind) {
  static const char *const names[] = {"?", "counter", "gauge", "histogram"};
  return kind >= RD_METRIC_COUNTER && kind <= RD_METRIC_HISTOGRAM ? names[kind] : "?";
}

int rd__metric_name_check(const char *name, char *err, size_t errlen) {
  size_t n = name ? strlen(name) : 0;
  if (!n || n > RD_METRIC_NAME_MAX || !metric_ident(name, n, 1)) {
    snprintf(err, errlen, "metric name '%.120s' is not 1..%d characters of [a-zA-Z_:][a-zA-Z0-9_:]*", name ? name : "(null)",
             RD_METRIC_NAME_MAX);
    return RD_EINVAL;
  }
  if (!strncmp(name, "raydist_", 8)) {
    snprintf(err, errlen, "metric name '%s': names starting with raydist_ are the node's own", name);
    return RD_EINVAL;
  }
  return 0;
}

typedef struct metric_tag {
  const char *k, *v;
  size_t kn, vn;
} metric_tag;

static int tag_cmp(const void *a, const void *b) {
  const metric_tag *x = a, *y = b;
  size_t n = x->kn < y->kn ? x->kn : y->kn;
  int c = memcmp(x->k, y->k, n);
  return c ? c : (x->kn > y->kn) - (x->kn < y->kn);
}

int rd__metric_tags_canon(const char *tags, char *out, size_t outlen, char *err, size_t errlen) {
  *out = 0;
  if (!tags || !*tags) return 0;
  metric_tag t[RD_METRIC_TAGS_MAX];
  size_t n = 0;
  for (const char *p = tags;;) {
    const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
    const char *eq = memchr(p, '=', (size_t)(end - p));
    if (n == RD_METRIC_TAGS_MAX) {
      snprintf(err, errlen, "tags '%.120s': more than %d", tags, RD_METRIC_TAGS_MAX);
      return RD_EINVAL;
    }
    if (!eq) {
      snprintf(err, errlen, "tags '%.120s': '%.*s' is not key=value", tags, (int)(end - p > 60 ? 60 : end - p), p);
      return RD_EINVAL;
    }
    metric_tag x = {p, eq + 1, (size_t)(eq - p), (size_t)(end - eq - 1)};
    if (!metric_ident(x.k, x.kn, 0) || x.kn > RD_METRIC_NAME_MAX || (x.kn == 2 && !memcmp(x.k, "le", 2)) ||
        (x.kn >= 2 && x.k[0] == '_' && x.k[1] == '_')) {
      snprintf(err, errlen, "tags '%.120s': key '%.*s' is not a name of [a-zA-Z_][a-zA-Z0-9_]* (nor le, nor __...)", tags,
               (int)(x.kn > 60 ? 60 : x.kn), x.k);
      return RD_EINVAL;
    }
    if (x.vn > RD_METRIC_TAG_VALUE_MAX || memchr(x.v, '=', x.vn)) {
      snprintf(err, errlen, "tags '%.120s': the value of %.*s is over %d bytes or holds '='", tags, (int)x.kn, x.k,
               RD_METRIC_TAG_VALUE_MAX);
      return RD_EINVAL;
    }
    for (size_t i = 0; i < x.vn; i++)
      if ((unsigned char)x.v[i] < 0x20 || x.v[i] == 0x7f) {
        snprintf(err, errlen, "tags '%.120s': the value of %.*s holds a control character", tags, (int)x.kn, x.k);
        return RD_EINVAL;
      }
    t[n++] = x;
    if (!comma) break;
    p = comma + 1;
  }
  qsort(t, n, sizeof(*t), tag_cmp);
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    if (i && !tag_cmp(&t[i - 1], &t[i])) {
      snprintf(err, errlen, "tags '%.120s': key %.*s given twice", tags, (int)t[i].kn, t[i].k);
      return RD_EINVAL;
    }
    int w = snprintf(out + off, outlen - off, "%s%.*s=%.*s", i ? "," : "", (int)t[i].kn, t[i].k, (int)t[i].vn, t[i].v);
    if (w < 0 || (size_t)w >= outlen - off) {
      snprintf(err, errlen, "tags '%.120s' are too long", tags);
      return RD_EINVAL;
    }
    off += (size_t)w;
  }
  return 0;
}

int rd__metric_bounds_check(const double *b, size_t n, char *err, size_t errlen) {
  if (!b || !n || n > RD_METRIC_BOUNDS_MAX) {
    snprintf(err, errlen, "a histogram needs 1..%d bucket bounds, not %zu", RD_METRIC_BOUNDS_MAX, b ? n : 0);
    return RD_EINVAL;
  }
  for (size_t i = 0; i < n; i++)
    if (!isfinite(b[i]) || (i && b[i] <= b[i - 1])) {
      snprintf(err, errlen, "histogram bounds must be finite and strictly ascending (bound %zu is %g)", i, b[i]);
      return RD_EINVAL;
    }
  return 0;
}

/* ------------------------------------------------------ hash tables */

uint64_t rd__hash_bytes(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Moves every entry into n buckets; RD_ENOMEM leaves the table as it was. */
static int htab_rehash(rd__htab *t, size_t n) {
  rd__hlink **nb = calloc(n, sizeof(*nb));
  if (!nb) return RD_ENOMEM;
  for (size_t i = 0; t->b && i <= t->mask; i++)
    for (rd__hlink *x = t->b[i], *next; x; x = next) {
      next = x->next;
      x->next = nb[x->hash & (n - 1)];
      nb[x->hash & (n - 1)] = x;
    }
  free(t->b);
  t->b = nb;
  t->mask = n - 1;
  return 0;
}

int rd__htab_add(rd__htab *t, rd__hlink *e) {
  size_t n = t->b ? t->mask + 1 : 0, want = t->count + 1;
  if (want > n) {
    if (htab_rehash(t, n ? n * 2 : 64) != 0) return RD_ENOMEM;
  } else if (n > RD_HTAB_KEEP && want < n / 8) {
    /* a burst has gone: give back its buckets (to at most 1/4 full) */
    while (n > RD_HTAB_KEEP && want < n / 8) n /= 2;
    (void)htab_rehash(t, n);   /* no memory for fewer: keep them */
  }
  e->next = t->b[e->hash & t->mask];
  t->b[e->hash & t->mask] = e;
  t->count++;
  return 0;
}

void rd__htab_del(rd__htab *t, rd__hlink *e) {
  for (rd__hlink **pp = t->b ? &t->b[e->hash & t->mask] : NULL; pp && *pp; pp = &(*pp)->next)
    if (*pp == e) {
      *pp = e->next;
      t->count--;
      return;
    }
}

size_t rd__htab_sweep(rd__htab *t, int (*keep)(rd__hlink *, void *), void (*drop)(rd__hlink *, void *), void *arg) {
  size_t n = 0;
  for (size_t i = 0; t->b && i <= t->mask; i++)
    for (rd__hlink **pp = &t->b[i]; *pp;) {
      rd__hlink *e = *pp;
      if (keep && keep(e, arg)) {
        pp = &e->next;
        continue;
      }
      *pp = e->next;
      t->count--;
      drop(e, arg);
      n++;
    }
  return n;
}

void rd__htab_free(rd__htab *t, void (*drop)(rd__hlink *, void *), void *arg) {
  rd__htab_sweep(t, NULL, drop, arg);
  free(t->b);
  memset(t, 0, sizeof(*t));
}

void rd__url_encode(char *out, size_t len, const char *s) {
  size_t k = 0;
  for (; *s && k + 4 < len; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-_.~", c))
      out[k++] = (char)c;
    else k += (size_t)snprintf(out + k, len - k, "%%%02X", c);
  }
  if (len) out[k] = 0;
}

int rd__query_open(rd__query *it, const char *query) {
  it->copy = strdup(query ? query : "");
  it->save = NULL;
  it->started = 0;
  return it->copy ? 0 : -1;
}

int rd__query_next(rd__query *it, char **key, char **val) {
  char *p = strtok_r(it->started ? NULL : it->copy, "&", &it->save);
  it->started = 1;
  if (!p) return 0;
  char *eq = strchr(p, '=');
  char *v = eq ? eq + 1 : p + strlen(p);
  if (eq) *eq = 0;
  if (rd__url_decode(p) != 0 || rd__url_decode(v) != 0) return -1;
  *key = p;
  *val = v;
  return 1;
}

void rd__query_close(rd__query *it) {
  free(it->copy);
  it->copy = NULL;
}

int rd__url_decode(char *s) {
  char *w = s;
  for (char *r = s; *r; r++) {
    if (*r == '+') *w++ = ' ';
    else if (*r != '%') *w++ = *r;
    else {
      unsigned v;
      if (!r[1] || !r[2] || sscanf(r + 1, "%2x", &v) != 1 || v == 0) return -1;
      *w++ = (char)v;
      r += 2;
    }
  }
  *w = 0;
  return 0;
}

void rd__raise_nofile(void) {
  static int done;
  struct rlimit rl;
  if (done++ || getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= 65536 || rl.rlim_cur >= rl.rlim_max) return;
  rlim_t was = rl.rlim_cur;
  rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
    rd__log(RD_LOG_WARN, "cannot raise the open-file limit from %llu: %s", (unsigned long long)was, strerror(errno));
}

int rd__open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;   /* less the directory's own */
}

int rd__errno_passing(int err) { return err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS; }

void rd__sys_error(char *out, size_t len, const char *what, int err, const char *who) {
  struct rlimit rl;
  int n = snprintf(out, len, "%s: %s", what, strerror(err));
  if (n < 0 || (size_t)n >= len) return;
  if ((err == EMFILE || err == ENFILE) && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    int held = rd__open_fds();   /* unknown when even the directory cannot be opened */
    if (held >= 0)
      snprintf(out + n, len - (size_t)n, " (%s holds %d open files; its limit is %llu: raise it with ulimit -n)", who,
               held, (unsigned long long)rl.rlim_cur);
    else
      snprintf(out + n, len - (size_t)n, " (the limit on %s's open files is %llu: raise it with ulimit -n)", who,
               (unsigned long long)rl.rlim_cur);
  } else if (err == EAGAIN && getrlimit(RLIMIT_NPROC, &rl) == 0) {
    snprintf(out + n, len - (size_t)n, " (the user's process limit is %llu: ulimit -u)", (unsigned long long)rl.rlim_cur);
  }
}
