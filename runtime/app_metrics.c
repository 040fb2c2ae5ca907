/* runtime/app_metrics.c - the node's side of application metrics
 * (rd_metric_*, Ray's ray.util.metrics): the series its drivers and
 * workers report (OwnerStats.app_metrics), added up, and served on
 * /metrics after the node's own families.
 *
 * A counter's series is the sum of what every process added (it keeps its
 * total after they exit); a gauge's the sum of the last value each live
 * process set (a process's part goes when it exits, the series when the
 * last part does: Ray's gauges without the WorkerId tag, its recommended
 * cardinality); a histogram's buckets, sum and count the sums.
 * Everything a process sends is checked again here (names, canonical tags,
 * values, bounds); a series that breaks a rule, disagrees with the kind or
 * bounds the node already has for its name, or would pass the limits is
 * dropped, counted in raydist_app_metric_rejected_total and logged (the
 * first few). */
#include "app_metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "log.h"

#define AM_METRICS_MAX 1024
#define AM_SERIES_MAX 20000    /* over every metric */
#define AM_LOG_MAX 10          /* rejections logged (all are counted) */

typedef struct am_part {
  uint32_t client;             /* a process that set a gauge */
  double value;                /* the last value it set */
} am_part;

typedef struct am_series {
  char *tags;
  double value, sum;           /* counter total; histogram sum */
  uint64_t *buckets;           /* histogram: nbounds + 1, not cumulative */
  am_part *parts;              /* gauge: one per live process that set it */
  size_t nparts, capparts;
} am_series;

typedef struct am_metric {
  char name[RD_METRIC_NAME_MAX + 1];
  char *help;
  int kind;
  size_t nbounds;
  double bounds[RD_METRIC_BOUNDS_MAX];
  am_series *s;
  size_t n, cap;
} am_metric;

static am_metric *am;
static size_t nam, capam, nseries;
static uint64_t rejected;

static void reject(const char *name, const char *why) {
  if (rejected++ < AM_LOG_MAX)
    rd__log(RD_LOG_WARN, "application metric '%.100s' dropped: %s%s", name, why,
            rejected == AM_LOG_MAX ? " (later ones are only counted: raydist_app_metric_rejected_total)" : "");
}

static am_metric *metric_for(const Rd__AppMetric *m, char *why, size_t len) {
  for (size_t i = 0; i < nam; i++) {
    am_metric *x = &am[i];
    if (strcmp(x->name, m->name) != 0) continue;
    if (x->kind != m->kind || x->nbounds != m->n_bounds ||
        (m->n_bounds && memcmp(x->bounds, m->bounds, m->n_bounds * sizeof(double)) != 0)) {
      snprintf(why, len, "another process made it a different kind, or a histogram with other bounds");
      return NULL;
    }
    return x;
  }
  if (nam == AM_METRICS_MAX) {
    snprintf(why, len, "the node serves %d application metrics already", AM_METRICS_MAX);
    return NULL;
  }
  if (nam == capam) {
    size_t cap = capam ? capam * 2 : 16;
    am_metric *v = realloc(am, cap * sizeof(*v));
    if (!v) {
      snprintf(why, len, "node out of memory");
      return NULL;
    }
    am = v;
    capam = cap;
  }
  am_metric *x = &am[nam];
  memset(x, 0, sizeof(*x));
  snprintf(x->name, sizeof(x->name), "%s", m->name);
  if (!(x->help = strdup(m->help ? m->help : ""))) {
    snprintf(why, len, "node out of memory");
    return NULL;
  }
  x->kind = m->kind;
  x->nbounds = m->n_bounds;
  if (m->n_bounds) memcpy(x->bounds, m->bounds, m->n_bounds * sizeof(double));
  nam++;
  return x;
}

static am_series *series_for(am_metric *x, const char *tags, char *why, size_t len) {
  for (size_t i = 0; i < x->n; i++)
    if (!strcmp(x->s[i].tags, tags)) return &x->s[i];
  if (nseries >= AM_SERIES_MAX) {
    snprintf(why, len, "the node serves %d application series already", AM_SERIES_MAX);
    return NULL;
  }
  if (x->n == x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 4;
    am_series *v = realloc(x->s, cap * sizeof(*v));
    if (!v) {
      snprintf(why, len, "node out of memory");
      return NULL;
    }
    x->s = v;
    x->cap = cap;
  }
  am_series *s = &x->s[x->n];
  memset(s, 0, sizeof(*s));
  if (!(s->tags = strdup(tags)) ||
      (x->kind == RD_METRIC_HISTOGRAM && !(s->buckets = calloc(x->nbounds + 1, sizeof(*s->buckets))))) {
    free(s->tags);
    snprintf(why, len, "node out of memory");
    return NULL;
  }
  x->n++;
  nseries++;
  return s;
}

/* why m cannot be taken as it is ("" when it can), its tags canonical in tags. */
static void check(const Rd__AppMetric *m, char *tags, char *why, size_t len) {
  *why = 0;
  if (rd__metric_name_check(m->name, why, len) != 0) return;
  if (m->kind < RD_METRIC_COUNTER || m->kind > RD_METRIC_HISTOGRAM) {
    snprintf(why, len, "kind %d is none of counter (1), gauge (2), histogram (3)", m->kind);
    return;
  }
  if (m->help && strlen(m->help) > RD_METRIC_HELP_MAX) {
    snprintf(why, len, "help over %d bytes", RD_METRIC_HELP_MAX);
    return;
  }
  if (rd__metric_tags_canon(m->tags, tags, RD_METRIC_TAGS_LEN, why, len) != 0) return;
  if (!isfinite(m->value) || (m->kind == RD_METRIC_COUNTER && m->value < 0)) {
    snprintf(why, len, "value %g", m->value);
    return;
  }
  if (m->kind != RD_METRIC_HISTOGRAM) {
    if (m->n_bounds || m->n_buckets) snprintf(why, len, "bounds or buckets on a %s", rd__metric_kind_name(m->kind));
    return;
  }
  if (rd__metric_bounds_check(m->bounds, m->n_bounds, why, len) != 0) return;
  if (m->n_buckets != m->n_bounds + 1 || !isfinite(m->sum))
    snprintf(why, len, "%zu buckets for %zu bounds, or a sum of %g", m->n_buckets, m->n_bounds, m->sum);
}

/* Client's part of gauge series s is v now: 0, or -1 out of memory. */
static int gauge_set(am_series *s, uint32_t client, double v) {
  for (size_t i = 0; i < s->nparts; i++)
    if (s->parts[i].client == client) {
      s->parts[i].value = v;
      return 0;
    }
  if (s->nparts == s->capparts) {
    size_t cap = s->capparts ? s->capparts * 2 : 2;
    am_part *p = realloc(s->parts, cap * sizeof(*p));
    if (!p) return -1;
    s->parts = p;
    s->capparts = cap;
  }
  s->parts[s->nparts++] = (am_part){client, v};
  return 0;
}

/* A gauge series' value: the sum of its processes' parts. */
static double gauge_value(const am_series *s) {
  double v = 0;
  for (size_t i = 0; i < s->nparts; i++) v += s->parts[i].value;
  return v;
}

void rd__app_metrics_add(Rd__AppMetric *const *ms, size_t n, uint32_t client) {
  char tags[RD_METRIC_TAGS_LEN], why[300];
  for (size_t i = 0; i < n; i++) {
    const Rd__AppMetric *m = ms[i];
    check(m, tags, why, sizeof(why));
    am_metric *x = *why ? NULL : metric_for(m, why, sizeof(why));
    am_series *s = x ? series_for(x, tags, why, sizeof(why)) : NULL;
    if (!s) {
      reject(m->name ? m->name : "", why);
      continue;
    }
    if (x->kind == RD_METRIC_COUNTER) s->value += m->value;
    else if (x->kind == RD_METRIC_GAUGE) {
      if (gauge_set(s, client, m->value) != 0) reject(m->name, "node out of memory");
    } else {
      for (size_t b = 0; b <= x->nbounds; b++) s->buckets[b] += m->buckets[b];
      s->sum += m->sum;
    }
  }
}

void rd__app_metrics_client_gone(uint32_t client) {
  for (size_t i = 0; i < nam; i++) {
    am_metric *x = &am[i];
    if (x->kind != RD_METRIC_GAUGE) continue;
    size_t k = 0;
    for (size_t j = 0; j < x->n; j++) {
      am_series *s = &x->s[j];
      size_t q = 0;
      for (size_t i = 0; i < s->nparts; i++)
        if (s->parts[i].client != client) s->parts[q++] = s->parts[i];
      s->nparts = q;
      if (!q) {   /* its last process went: so does the series */
        free(s->parts);
        free(s->tags);
        nseries--;
        continue;
      }
      x->s[k++] = *s;
    }
    x->n = k;
  }
}

/* The help text as a HELP line takes it: \ and newlines escaped. */
static void put_help(rd__mbuf *b, const char *name, const char *help) {
  rd__mbuf_printf(b, "# HELP %s ", name);
  for (const char *p = *help ? help : "An application metric (rd_metric_*)."; *p; p++) {
    if (*p == '\\') rd__mbuf_printf(b, "\\\\");
    else if (*p == '\n') rd__mbuf_printf(b, "\\n");
    else rd__mbuf_printf(b, "%c", *p);
  }
  rd__mbuf_printf(b, "\n");
}

/* {k="v",...} for canonical tags (and le when given); nothing without either.
 * Values hold no control character (checked): only \ and " are escaped. */
static void put_labels(rd__mbuf *b, const char *tags, const char *le) {
  if (!*tags && !le) return;
  rd__mbuf_printf(b, "{");
  for (const char *p = tags; *p;) {
    const char *eq = strchr(p, '='), *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    rd__mbuf_printf(b, "%s%.*s=\"", p == tags ? "" : ",", (int)(eq - p), p);
    for (const char *v = eq + 1; v < end; v++) {
      if (*v == '\\' || *v == '"') rd__mbuf_printf(b, "\\%c", *v);
      else rd__mbuf_printf(b, "%c", *v);
    }
    rd__mbuf_printf(b, "\"");
    p = *end ? end + 1 : end;
  }
  if (le) rd__mbuf_printf(b, "%sle=\"%s\"", *tags ? "," : "", le);
  rd__mbuf_printf(b, "}");
}

void rd__app_metrics_print(rd__mbuf *b) {
  rd__mbuf_family(b, "raydist_app_metric_series", "gauge",
                  "Series of application metrics (rd_metric_*) this node serves.");
  rd__mbuf_printf(b, "raydist_app_metric_series %zu\n", nseries);
  rd__mbuf_family(b, "raydist_app_metric_rejected_total", "counter",
                  "Application metric series reports dropped: malformed, disagreeing with the kind or bounds "
                  "the node has for the name, or past the node's limits.");
  rd__mbuf_printf(b, "raydist_app_metric_rejected_total %llu\n", (unsigned long long)rejected);
  for (size_t i = 0; i < nam; i++) {
    const am_metric *x = &am[i];
    put_help(b, x->name, x->help);
    rd__mbuf_printf(b, "# TYPE %s %s\n", x->name, rd__metric_kind_name(x->kind));
    for (size_t k = 0; k < x->n; k++) {
      const am_series *s = &x->s[k];
      if (x->kind != RD_METRIC_HISTOGRAM) {
        rd__mbuf_printf(b, "%s", x->name);
        put_labels(b, s->tags, NULL);
        rd__mbuf_printf(b, " %.17g\n", x->kind == RD_METRIC_GAUGE ? gauge_value(s) : s->value);
        continue;
      }
      uint64_t cum = 0;
      char le[40];
      for (size_t j = 0; j <= x->nbounds; j++) {
        cum += s->buckets[j];
        if (j < x->nbounds) snprintf(le, sizeof(le), "%.17g", x->bounds[j]);
        else snprintf(le, sizeof(le), "+Inf");
        rd__mbuf_printf(b, "%s_bucket", x->name);
        put_labels(b, s->tags, le);
        rd__mbuf_printf(b, " %llu\n", (unsigned long long)cum);
      }
      rd__mbuf_printf(b, "%s_sum", x->name);
      put_labels(b, s->tags, NULL);
      rd__mbuf_printf(b, " %.17g\n%s_count", s->sum, x->name);
      put_labels(b, s->tags, NULL);
      rd__mbuf_printf(b, " %llu\n", (unsigned long long)cum);
    }
  }
}
