/* examples/elastic_service.c - an elastic embedding service: a pool of
 * all-MiniLM-L6-v2 engine replicas that grows under load and shrinks when
 * the load goes away, driven by an open-loop load generator.
 *
 * The driver plays the clients: requests (a few fortune cookies each) arrive
 * at a fixed rate that changes by phase (low, high, low, ...), each is
 * admitted with rd_pool_submit within a bounded wait (or rejected), and its
 * result comes back through a completion queue: the loop sleeps in poll()
 * on the queue's fd until the next arrival or a result, as a server's event
 * loop would, and rd_cq_take hands it the finished requests.  Every second a
 * line reports the rate,
 * the replicas, the requests in flight, the admission wait and the latency
 * percentiles; a summary line ends the run.  Nothing here may run before
 * rd_init(): this program is also its own worker processes.
 *
 *   elastic_service [--duration S] [--phase-seconds S] [--low-rate R] [--high-rate R]
 *                   [--texts-per-request N] [--max-replicas N] [--min-replicas N]
 *                   [--inflight N] [--max-wait-ms MS] [--scale-up-wait-ms MS]
 *                   [--scale-down-idle-ms MS] [--cpus-per-replica F]
 *                   [--threads-per-replica N] [--model DIR] */
#include <raydist.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "corpus.h"
#include "embedder.h"
#include "engine.h"


/* The replicas are Embedder actors (examples/embedder.c). */

/* Request k carries corpus items k*per .. k*per+per-1 (ex_corpus_encode
 * counts round the corpus). */

/* -------------------------------------------------------------- driver */

typedef struct opts {
  const char *model, *fortunes;
  double duration, phase_seconds, low_rate, high_rate, cpus;
  int per_request, min_replicas, max_replicas, inflight, max_wait_ms, scale_up_wait_ms, scale_down_idle_ms, threads;
} opts;

static void usage(void) {
  fprintf(stderr,
          "usage: elastic_service [--duration S] [--phase-seconds S] [--low-rate R] [--high-rate R]\n"
          "                       [--texts-per-request N] [--min-replicas N] [--max-replicas N] [--inflight N]\n"
          "                       [--max-wait-ms MS] [--scale-up-wait-ms MS] [--scale-down-idle-ms MS]\n"
          "                       [--cpus-per-replica F] [--threads-per-replica N] [--model DIR] [--fortunes DIR]\n");
  exit(2);
}

static void parse(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof(*o));
  o->duration = 18;
  o->phase_seconds = 6;
  o->low_rate = 1;
  o->high_rate = 40;
  o->per_request = 8;
  o->min_replicas = 1;
  o->max_replicas = 3;
  o->inflight = 2;
  o->max_wait_ms = 500;
  o->scale_up_wait_ms = 10;
  o->scale_down_idle_ms = 1000;
  o->cpus = 0.5;
  o->threads = 1;
  o->fortunes = "/usr/share/games/fortunes";
  o->model = ex_model_dir();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && v && ++i)
    if (OPT("--duration")) o->duration = atof(v);
    else if (OPT("--phase-seconds")) o->phase_seconds = atof(v);
    else if (OPT("--low-rate")) o->low_rate = atof(v);
    else if (OPT("--high-rate")) o->high_rate = atof(v);
    else if (OPT("--texts-per-request")) o->per_request = atoi(v);
    else if (OPT("--min-replicas")) o->min_replicas = atoi(v);
    else if (OPT("--max-replicas")) o->max_replicas = atoi(v);
    else if (OPT("--inflight")) o->inflight = atoi(v);
    else if (OPT("--max-wait-ms")) o->max_wait_ms = atoi(v);
    else if (OPT("--scale-up-wait-ms")) o->scale_up_wait_ms = atoi(v);
    else if (OPT("--scale-down-idle-ms")) o->scale_down_idle_ms = atoi(v);
    else if (OPT("--cpus-per-replica")) o->cpus = atof(v);
    else if (OPT("--threads-per-replica")) o->threads = atoi(v);
    else if (OPT("--model")) o->model = v;
    else if (OPT("--fortunes")) o->fortunes = v;
    else usage();
#undef OPT
  }
  if (o->duration <= 0 || o->phase_seconds <= 0 || o->low_rate <= 0 || o->high_rate <= 0 || o->per_request < 1 ||
      o->per_request > EX_MAX_TEXTS || o->min_replicas < 1 || o->max_replicas < o->min_replicas || o->inflight < 1 ||
      o->max_wait_ms < 0 || o->scale_up_wait_ms < 0 || o->scale_down_idle_ms < 0 || o->cpus < 0 || o->threads < 1)
    ex_die(2, "bad option value (rates, durations and counts must be positive, texts per request at most %d, "
           "max replicas at least min replicas)",
        EX_MAX_TEXTS);
}

/* Phases alternate low, high, low, ... each phase_seconds long. */
static int phase_high(const opts *o, double t) { return ((long)(t / o->phase_seconds)) % 2 == 1; }
static double phase_rate(const opts *o, double t) { return phase_high(o, t) ? o->high_rate : o->low_rate; }
static double phase_end(const opts *o, double t) { return ((double)(long)(t / o->phase_seconds) + 1) * o->phase_seconds; }

/* A request admitted into the pool and not read back yet. */
typedef struct request {
  rd_ref ref;
  double arrival;   /* when the client sent it (seconds since the start) */
} request;

typedef struct replica_count {
  int pid;
  uint64_t requests;
  double busy;
} replica_count;

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
  (void)sig;
  interrupted = 1;
}

typedef struct service {
  const opts *o;
  rd_pool *pool;
  double t0;
  request *fl;          /* in flight, unordered */
  size_t nfl, capfl;
  rd_cq *cq;            /* their results, as they finish (tag: the ref's id) */
  /* this second */
  ex_series lat_window;
  double qwait_sum;
  uint64_t qwait_n, done_window, rejected_window;
  /* the whole run */
  ex_series lat_all;
  uint64_t done, rejected, failed;
  int max_seen;
  replica_count reps[64];
  int nreps;
} service;

static double since_start(const service *s) { return ex_now() - s->t0; }

static void sample_replicas(service *s, rd_pool_stats *st) {
  rd_pool_get_stats(s->pool, st);   /* a pool call: it also scales down idle replicas */
  if (st->replicas > s->max_seen) s->max_seen = st->replicas;
}

/* Request q finished at t: read its result (res, the queue's reference). */
static void finish(service *s, const request *q, rd_ref res, double t) {
  rd_buf b;
  int r = rd_get(&res, 1, &b, RD_TIMEOUT_INF);
  if (r != 0) {
    fprintf(stderr, "elastic_service: a request failed: %.*s\n", (int)b.size, (const char *)b.data);
    s->failed++;
  } else {
    ex_result_hdr h;
    ex_result_rows(&b, 0, 0, 384, &h, "a replica");
    double ms = (t - q->arrival) * 1000.0;
    ex_series_add(&s->lat_window, ms);
    ex_series_add(&s->lat_all, ms);
    s->done++;
    s->done_window++;
    int k = 0;
    while (k < s->nreps && s->reps[k].pid != h.pid) k++;
    if (k == s->nreps && k < 64) s->reps[s->nreps++] = (replica_count){h.pid, 0, 0};
    if (k < 64) s->reps[k].requests++, s->reps[k].busy += h.seconds;
  }
  rd_buf_release(&b);
  rd_ref_release(res);
  rd_ref_release(q->ref);
}

/* Wait up to ms (-1: no limit) for a result, in poll() on the queue's fd. */
static void wait_results(service *s, int ms) {
  struct pollfd p = {rd_cq_fd(s->cq), POLLIN, 0};
  while (poll(&p, 1, ms) < 0 && errno == EINTR && !interrupted) {}
}

/* Read every finished request (no waiting). */
static void collect(service *s) {
  rd_cq_event ev[64];
  int n;
  while ((n = rd_cq_take(s->cq, ev, 64, 0)) > 0) {
    double t = since_start(s);
    for (int e = 0; e < n; e++) {
      size_t i = 0;
      while (i < s->nfl && s->fl[i].ref.id != ev[e].tag) i++;
      if (i == s->nfl) ex_die(1, "a result of no request in flight");
      request q = s->fl[i];
      s->fl[i] = s->fl[--s->nfl];
      finish(s, &q, ev[e].ref, t);
    }
  }
}

static void report(service *s, double t) {
  rd_pool_stats st;
  sample_replicas(s, &st);
  double p50 = ex_percentile(&s->lat_window, 0.50), p99 = ex_percentile(&s->lat_window, 0.99);
  printf("t=%.0f rate=%.0f replicas=%d inflight=%zu queue_wait_ms=%.1f p50_ms=%.1f p99_ms=%.1f done=%llu rejected=%llu\n",
         t, phase_rate(s->o, t - 0.5), st.replicas, s->nfl, s->qwait_n ? s->qwait_sum / (double)s->qwait_n : 0.0, p50,
         p99, (unsigned long long)s->done_window, (unsigned long long)s->rejected_window);
  fflush(stdout);
  s->lat_window.n = 0;
  s->qwait_sum = 0;
  s->qwait_n = s->done_window = s->rejected_window = 0;
}

int main(int argc, char **argv) {
  ex_set_prog("elastic_service");
  opts o;
  parse(argc, argv, &o);
  /* in a worker this never returns: workers only serve the Embedder actor */
  int r = rd_init(NULL);
  if (r != 0) ex_die(1, "rd_init: %s", rd_strerror(r));

  ex_corpus corpus = {0};
  ex_corpus_load(&corpus, "fortunes", o.fortunes);

  /* a replica that cannot be placed would take calls and never serve them */
  rd_node_info ni;
  if ((r = rd_node_info_get(&ni)) != 0) ex_die(1, "rd_node_info_get: %s", rd_strerror(r));
  if (o.cpus * o.max_replicas > ni.num_cpus + 1e-9)
    ex_die(2, "%d replicas x %.2f CPUs do not fit the node's %.0f CPUs (lower --cpus-per-replica)", o.max_replicas,
        o.cpus, ni.num_cpus);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.num_cpus = o.cpus;
  rd_pool_opts po;
  rd_pool_opts_init(&po);
  po.min_replicas = o.min_replicas;
  po.max_replicas = o.max_replicas;
  po.max_inflight_per_replica = o.inflight;
  po.scale_up_wait_ms = o.scale_up_wait_ms;
  po.scale_down_idle_ms = o.scale_down_idle_ms;
  service s;
  memset(&s, 0, sizeof(s));
  s.o = &o;
  int no_gpu = 0;
  r = rd_pool_create(Embedder, RD_ARGS(rd_arg_bytes(o.model, strlen(o.model)), rd_arg_bytes(&o.threads, sizeof(int)),
                               rd_arg_bytes(&no_gpu, sizeof(int))),
                     &ao, &po, &s.pool);
  if (r != 0) ex_die(1, "cannot create the replicas: %s", rd_strerror(r));

  /* Warm up: one request, so the first replica's engine is open before the
   * clock starts (its constructor runs in the background). */
  {
    size_t bytes;
    uint8_t *b = ex_corpus_encode(&corpus, 0, 1, &bytes);
    rd_ref ref;
    rd_buf res;
    r = rd_pool_submit(s.pool, Embedder_embed, RD_ARGS(rd_arg_bytes(b, bytes)), RD_TIMEOUT_INF, &ref);
    free(b);
    if (r != 0) ex_die(1, "submit failed: %s", rd_strerror(r));
    if ((r = rd_get(&ref, 1, &res, RD_TIMEOUT_INF)) != 0)
      ex_die(1, "the first replica cannot serve: %.*s", (int)res.size, (const char *)res.data);
    rd_buf_release(&res);
    rd_ref_release(ref);
  }
  printf("service: replicas=%d..%d texts_per_request=%d low_rate=%.1f high_rate=%.1f phase_seconds=%.1f "
         "duration=%.1f max_wait_ms=%d scale_up_wait_ms=%d scale_down_idle_ms=%d\n",
         o.min_replicas, o.max_replicas, o.per_request, o.low_rate, o.high_rate, o.phase_seconds, o.duration,
         o.max_wait_ms, o.scale_up_wait_ms, o.scale_down_idle_ms);
  fflush(stdout);

  signal(SIGINT, on_sigint);
  signal(SIGTERM, on_sigint);
  s.capfl = 1024;
  s.fl = calloc(s.capfl, sizeof(request));
  if (!s.fl) ex_die(1, "out of memory");
  if ((r = rd_cq_create(&s.cq)) != 0) ex_die(1, "rd_cq_create: %s", rd_strerror(r));
  s.max_seen = o.min_replicas;
  s.t0 = ex_now();
  double next_arrival = 0, next_report = 1;
  uint64_t k = 0;
  for (;;) {
    double t = since_start(&s);
    if (t >= o.duration || interrupted) {
      if (!interrupted && next_report <= o.duration + 1e-9) {   /* the last second's line */
        collect(&s);
        report(&s, next_report);
      }
      break;
    }
    collect(&s);
    /* every client request that has arrived by now */
    while (next_arrival <= t && next_arrival < o.duration && !interrupted) {
      double arrival = next_arrival;
      double step = 1.0 / phase_rate(&o, arrival);
      double end = phase_end(&o, arrival);
      next_arrival = arrival + step < end ? arrival + step : end;
      double late_ms = (t - arrival) * 1000.0;
      if (late_ms >= o.max_wait_ms || s.nfl == s.capfl) {   /* waited too long already: the client gave up */
        s.rejected++;
        s.rejected_window++;
      } else {
        size_t bytes;
        uint8_t *b = ex_corpus_encode(&corpus, (size_t)(k++ * (uint64_t)o.per_request), (size_t)o.per_request, &bytes);
        rd_ref ref;
        r = rd_pool_submit(s.pool, Embedder_embed, RD_ARGS(rd_arg_bytes(b, bytes)),
                           (int64_t)(o.max_wait_ms - late_ms), &ref);
        free(b);
        double admitted = since_start(&s);
        if (r == RD_ETIMEDOUT) {
          s.rejected++;
          s.rejected_window++;
        } else if (r != 0) {
          ex_die(1, "submit failed: %s", rd_strerror(r));
        } else {
          if ((r = rd_cq_add(s.cq, ref, ref.id)) != 0) ex_die(1, "rd_cq_add: %s", rd_strerror(r));
          s.fl[s.nfl++] = (request){ref, arrival};
          s.qwait_sum += (admitted - arrival) * 1000.0;
          s.qwait_n++;
        }
        rd_pool_stats st;
        sample_replicas(&s, &st);
      }
      t = since_start(&s);
      if (t >= next_report) break;   /* report on time even while behind */
      collect(&s);
    }
    if (t >= next_report) {
      collect(&s);
      report(&s, next_report);
      next_report += 1;
      continue;
    }
    /* sleep until the next arrival or report, waking early for results */
    double until = next_arrival < next_report ? next_arrival : next_report;
    if (until > o.duration) until = o.duration;
    int64_t ms = (int64_t)((until - since_start(&s)) * 1000.0) + 1;
    if (ms <= 0) continue;
    wait_results(&s, ms > INT32_MAX ? INT32_MAX : (int)ms);
  }
  /* the clients stop; read what is still in flight */
  while (s.nfl) {
    wait_results(&s, -1);
    collect(&s);
  }
  rd_pool_stats st;
  sample_replicas(&s, &st);
  double p50 = ex_percentile(&s.lat_all, 0.50), p99 = ex_percentile(&s.lat_all, 0.99);
  printf("summary: requests=%llu max_replicas_seen=%d final_replicas=%d p50_ms=%.1f p99_ms=%.1f rejected=%llu "
         "failed=%llu scale_ups=%d scale_downs=%d seconds=%.1f\n",
         (unsigned long long)s.done, s.max_seen, st.replicas, p50, p99, (unsigned long long)s.rejected,
         (unsigned long long)s.failed, st.scale_ups, st.scale_downs, since_start(&s));
  double wall = since_start(&s);
  for (int i = 0; i < s.nreps; i++)
    printf("replica pid=%d requests=%llu busy=%.2fs utilisation=%.0f%%\n", s.reps[i].pid,
           (unsigned long long)s.reps[i].requests, s.reps[i].busy, 100.0 * s.reps[i].busy / (wall > 0 ? wall : 1));
  rd_pool_destroy(s.pool);
  ex_corpus_free(&corpus);
  rd_cq_destroy(s.cq);
  free(s.fl);
  free(s.lat_window.v);
  free(s.lat_all.v);
  rd_shutdown();
  return s.failed ? 1 : 0;
}
