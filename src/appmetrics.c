/* src/appmetrics.c - application metrics (rd_metric_*, Ray's
 * ray.util.metrics) on the process side.
 *
 * Each process keeps its metrics' series (one per canonical tag set) under
 * the context's mutex: a counter's increase and a histogram's counts since
 * the last report, a gauge's last value.  The owner's report (OwnerStats,
 * client.c's ost_report: every 100 ms while something changed) carries the
 * series that changed, and the deltas start over once it is sent.  The
 * node adds them up and serves them (runtime/app_metrics.c). */
#include <math.h>
#include <stdio.h>

#include "internal.h"
#include "log.h"

#define G rd__g

#define APPM_MAX 256           /* metrics per process */
#define APPM_SERIES_MAX 1000   /* tag sets per metric */

typedef struct appm_series {
  char *tags;                  /* canonical ("" none) */
  double value;                /* counter: added since the last report; gauge: its value */
  double sum;                  /* histogram: of what was counted since the last report */
  uint64_t *buckets;           /* histogram: nbounds + 1 counts since the last report */
  int dirty;
} appm_series;

struct rd_metric {
  char name[RD_METRIC_NAME_MAX + 1];
  char help[RD_METRIC_HELP_MAX + 1];
  int kind;
  size_t nbounds;
  double bounds[RD_METRIC_BOUNDS_MAX];
  appm_series *s;
  size_t n, cap;
  size_t ndirty;
};

static rd_metric *appm[APPM_MAX];
static size_t nappm, appm_dirty;   /* metrics; series changed since the last report */

static int define(const char *api, const char *name, const char *help, int kind, const double *bounds, size_t nbounds,
                  rd_metric **out) {
  char err[300];
  if (!out) return RD_EINVAL;
  *out = NULL;
  if (rd__metric_name_check(name, err, sizeof(err)) != 0 ||
      (kind == RD_METRIC_HISTOGRAM && rd__metric_bounds_check(bounds, nbounds, err, sizeof(err)) != 0)) {
    rd__log(RD_LOG_WARN, "%s: %s", api, err);
    return RD_EINVAL;
  }
  if (help && strlen(help) > RD_METRIC_HELP_MAX) {
    rd__log(RD_LOG_WARN, "%s '%s': help over %d bytes", api, name, RD_METRIC_HELP_MAX);
    return RD_EINVAL;
  }
  pthread_mutex_lock(&G.mu);
  int r = 0;
  rd_metric *m = NULL;
  if (!G.inited) r = RD_ESTATE;
  for (size_t i = 0; !r && i < nappm && !m; i++)
    if (!strcmp(appm[i]->name, name)) m = appm[i];
  if (!r && m && (m->kind != kind || m->nbounds != (kind == RD_METRIC_HISTOGRAM ? nbounds : 0) ||
                  (kind == RD_METRIC_HISTOGRAM && memcmp(m->bounds, bounds, nbounds * sizeof(*bounds)) != 0))) {
    rd__log(RD_LOG_WARN, "%s: '%s' is already a %s%s in this process", api, name, rd__metric_kind_name(m->kind),
            m->kind == kind ? " with other bounds" : "");
    r = RD_EEXIST;
  } else if (!r && !m && nappm == APPM_MAX) {
    rd__log(RD_LOG_WARN, "%s '%s': this process has defined %d metrics already", api, name, APPM_MAX);
    r = RD_ENOMEM;
  } else if (!r && !m) {
    if (!(m = calloc(1, sizeof(*m)))) r = RD_ENOMEM;
    else {
      snprintf(m->name, sizeof(m->name), "%s", name);
      snprintf(m->help, sizeof(m->help), "%s", help ? help : "");
      m->kind = kind;
      if (kind == RD_METRIC_HISTOGRAM) {
        m->nbounds = nbounds;
        memcpy(m->bounds, bounds, nbounds * sizeof(*bounds));
      }
      appm[nappm++] = m;
    }
  }
  pthread_mutex_unlock(&G.mu);
  if (!r) *out = m;
  return r;
}

int rd_metric_counter(const char *name, const char *help, rd_metric **out) {
  return define("rd_metric_counter", name, help, RD_METRIC_COUNTER, NULL, 0, out);
}
int rd_metric_gauge(const char *name, const char *help, rd_metric **out) {
  return define("rd_metric_gauge", name, help, RD_METRIC_GAUGE, NULL, 0, out);
}
int rd_metric_histogram(const char *name, const char *help, const double *bounds, size_t nbounds, rd_metric **out) {
  return define("rd_metric_histogram", name, help, RD_METRIC_HISTOGRAM, bounds, nbounds, out);
}

/* m's series for the canonical tags, made when new; NULL when out of room
 * (why logged).  G.mu held. */
static appm_series *series(const char *api, rd_metric *m, const char *tags, int *err) {
  for (size_t i = 0; i < m->n; i++)
    if (!strcmp(m->s[i].tags, tags)) return &m->s[i];
  if (m->n == APPM_SERIES_MAX) {
    rd__log(RD_LOG_WARN, "%s '%s': %d tag sets already in this process", api, m->name, APPM_SERIES_MAX);
    *err = RD_ENOMEM;
    return NULL;
  }
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 4;
    appm_series *s = realloc(m->s, cap * sizeof(*s));
    if (!s) {
      *err = RD_ENOMEM;
      return NULL;
    }
    m->s = s;
    m->cap = cap;
  }
  appm_series *x = &m->s[m->n];
  memset(x, 0, sizeof(*x));
  if (!(x->tags = strdup(tags)) ||
      (m->kind == RD_METRIC_HISTOGRAM && !(x->buckets = calloc(m->nbounds + 1, sizeof(*x->buckets))))) {
    free(x->tags);
    *err = RD_ENOMEM;
    return NULL;
  }
  m->n++;
  return x;
}

static int update(const char *api, rd_metric *m, int kind, double v, const char *tags) {
  if (!m) return RD_EINVAL;
  if (m->kind != kind) {
    rd__log(RD_LOG_WARN, "%s: '%s' is a %s", api, m->name, rd__metric_kind_name(m->kind));
    return RD_EINVAL;
  }
  if (!isfinite(v) || (kind == RD_METRIC_COUNTER && v < 0)) {
    rd__log(RD_LOG_WARN, "%s '%s': %g is not a finite value%s", api, m->name, v,
            kind == RD_METRIC_COUNTER ? " of at least 0 (a counter only goes up)" : "");
    return RD_EINVAL;
  }
  char canon[RD_METRIC_TAGS_LEN], err[300];
  if (rd__metric_tags_canon(tags, canon, sizeof(canon), err, sizeof(err)) != 0) {
    rd__log(RD_LOG_WARN, "%s '%s': %s", api, m->name, err);
    return RD_EINVAL;
  }
  pthread_mutex_lock(&G.mu);
  int r = 0;
  appm_series *s = G.inited ? series(api, m, canon, &r) : NULL;
  if (!G.inited) r = RD_ESTATE;
  if (s) {
    if (kind == RD_METRIC_COUNTER) s->value += v;
    else if (kind == RD_METRIC_GAUGE) s->value = v;
    else {
      size_t b = 0;
      while (b < m->nbounds && v > m->bounds[b]) b++;
      s->buckets[b]++;
      s->sum += v;
    }
    if (!s->dirty) {
      s->dirty = 1;
      m->ndirty++;
      appm_dirty++;
    }
    rd__ost_touch();   /* the next report carries it */
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

int rd_metric_inc(rd_metric *m, double v, const char *tags) { return update("rd_metric_inc", m, RD_METRIC_COUNTER, v, tags); }
int rd_metric_set(rd_metric *m, double v, const char *tags) { return update("rd_metric_set", m, RD_METRIC_GAUGE, v, tags); }
int rd_metric_observe(rd_metric *m, double v, const char *tags) {
  return update("rd_metric_observe", m, RD_METRIC_HISTOGRAM, v, tags);
}

size_t rd__appm_pack(Rd__AppMetric **out_v, Rd__AppMetric ***out_p) {
  *out_v = NULL;
  *out_p = NULL;
  if (!appm_dirty) return 0;
  Rd__AppMetric *v = calloc(appm_dirty, sizeof(*v));
  Rd__AppMetric **p = calloc(appm_dirty, sizeof(*p));
  if (!v || !p) {   /* out of memory: sent with a later report */
    free(v);
    free(p);
    return 0;
  }
  size_t n = 0;
  for (size_t i = 0; i < nappm; i++) {
    rd_metric *m = appm[i];
    for (size_t k = 0; m->ndirty && k < m->n && n < appm_dirty; k++) {
      appm_series *s = &m->s[k];
      if (!s->dirty) continue;
      Rd__AppMetric *x = &v[n];
      rd__app_metric__init(x);
      x->name = m->name;
      x->help = m->help;
      x->kind = m->kind;
      x->tags = s->tags;
      x->value = s->value;
      if (m->kind == RD_METRIC_HISTOGRAM) {
        x->n_bounds = m->nbounds;
        x->bounds = m->bounds;
        x->n_buckets = m->nbounds + 1;
        x->buckets = s->buckets;
        x->sum = s->sum;
      }
      p[n++] = x;
    }
  }
  *out_v = v;
  *out_p = p;
  return n;
}

void rd__appm_done(Rd__AppMetric *v, Rd__AppMetric **p, int sent) {
  free(v);
  free(p);
  if (!sent || !appm_dirty) return;
  for (size_t i = 0; i < nappm; i++) {
    rd_metric *m = appm[i];
    for (size_t k = 0; m->ndirty && k < m->n; k++) {
      appm_series *s = &m->s[k];
      if (!s->dirty) continue;
      s->dirty = 0;
      m->ndirty--;
      if (m->kind == RD_METRIC_COUNTER) s->value = 0;
      if (m->kind == RD_METRIC_HISTOGRAM) {
        memset(s->buckets, 0, (m->nbounds + 1) * sizeof(*s->buckets));
        s->sum = 0;
      }
    }
  }
  appm_dirty = 0;
}
