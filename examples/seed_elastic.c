/* examples/seed_elastic.c - seed scenario 3: an elastic inference service
 * whose driver routes every request itself to the replica with the fewest
 * outstanding requests, and grows or shrinks the set of replicas with an
 * explicit scale(n).
 *
 * The replicas are Embedder actors (examples/embedder.c); a request is a few
 * corpus texts.  A schedule of phases ("replicas:rate:seconds,...") drives
 * the run: at the start of each phase scale(replicas) adds replica actors or
 * retires the newest ones (a retired replica takes no new request and is
 * killed once its outstanding ones are answered), then requests arrive at the
 * phase's rate.  Every second a line gives the replica count, the outstanding
 * requests of each replica and the latency percentiles; the summary gives
 * what each replica served, checks that every request went to a least
 * loaded replica, and counts the "contested" routings, where some replica
 * had more outstanding requests than the one chosen.  examples/elastic_service does the same with rd_pool
 * choosing the replica and the size.  Nothing here may run before rd_init():
 * this program is also its own workers.
 *
 *   seed_elastic [--schedule R:RATE:S,...] [--texts-per-request N] [--cpus-per-replica F]
 *                [--threads-per-replica N] [--model DIR] [--corpus wordnet|fortunes|PATH] */
#include <raydist.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corpus.h"
#include "embedder.h"

#define MAX_REPLICAS 16  /* replicas created over a run */
#define MAX_PHASES 16
#define MAX_OUT 1024     /* requests outstanding at once */

typedef struct replica {
  rd_actor actor;
  int live, retiring;    /* retiring: no new requests; killed when outstanding reaches 0 */
  int outstanding;
  uint64_t served, last_routed;   /* last_routed: the request number it last got (ties go to the oldest) */
  double busy;           /* seconds in the engine */
} replica;

typedef struct request {
  rd_ref ref;
  int replica;
  double arrival;
} request;

typedef struct service {
  const char *model;
  int threads;
  double cpus;
  replica rep[MAX_REPLICAS];
  int nrep;              /* slots used (live or not) */
  request out[MAX_OUT];
  size_t nout;
  uint64_t routed, least_loaded_routes, contested, done, added, removed;
  ex_series lat_window, lat_all;
  double t0;
} service;

static int active_replicas(const service *s) {
  int n = 0;
  for (int i = 0; i < s->nrep; i++) n += s->rep[i].live && !s->rep[i].retiring;
  return n;
}

/* scale(n): add replica actors, or retire the newest active ones. */
static void scale(service *s, int n) {
  int have = active_replicas(s), from = have;
  for (int i = s->nrep - 1; i >= 0 && have > n; i--)
    if (s->rep[i].live && !s->rep[i].retiring) s->rep[i].retiring = 1, have--, s->removed++;
  while (have < n) {
    int slot = s->nrep;   /* slots are not reused: the summary reports every replica */
    if (slot == MAX_REPLICAS) ex_die(2, "more than %d replicas over the run", MAX_REPLICAS);
    rd_actor_opts ao;
    rd_actor_opts_init(&ao);
    ao.num_cpus = s->cpus;
    int no_gpu = 0;
    int r = rd_actor_create(Embedder,
                            RD_ARGS(rd_arg_bytes(s->model, strlen(s->model)), rd_arg_bytes(&s->threads, sizeof(int)),
                                    rd_arg_bytes(&no_gpu, sizeof(int))),
                            &ao, &s->rep[slot].actor);
    if (r != 0) ex_die(1, "cannot create a replica: %s", rd_strerror(r));
    s->rep[slot].live = 1;
    s->nrep = slot + 1;
    have++, s->added++;
  }
  printf("scale: %d -> %d replicas\n", from, n);
  fflush(stdout);
}

/* Least-loaded routing: the active replica with the fewest outstanding
 * requests; on a tie the one that got a request least recently, so an idle
 * service still spreads its requests. */
static int route(service *s) {
  int best = -1;
  for (int i = 0; i < s->nrep; i++) {
    const replica *r = &s->rep[i];
    if (!r->live || r->retiring) continue;
    if (best < 0 || r->outstanding < s->rep[best].outstanding ||
        (r->outstanding == s->rep[best].outstanding && r->last_routed < s->rep[best].last_routed))
      best = i;
  }
  return best;
}

static void send_request(service *s, const ex_corpus *c, uint64_t k, int per, double arrival) {
  int i = route(s);
  int least = 1, contested = 0;   /* checked apart from route(): nobody active has fewer; someone has more */
  for (int j = 0; j < s->nrep; j++)
    if (s->rep[j].live && !s->rep[j].retiring) {
      if (s->rep[j].outstanding < s->rep[i].outstanding) least = 0;
      if (s->rep[j].outstanding > s->rep[i].outstanding) contested = 1;
    }
  size_t bytes;
  uint8_t *b = ex_corpus_encode(c, (size_t)(k * (uint64_t)per), (size_t)per, &bytes);
  rd_ref ref;
  if (rd_actor_call(s->rep[i].actor, Embedder_embed, RD_ARGS(rd_arg_bytes(b, bytes)), NULL, &ref) != 0)
    ex_die(1, "cannot call replica %d", i);
  free(b);
  s->out[s->nout++] = (request){ref, i, arrival};
  s->rep[i].outstanding++;
  s->rep[i].last_routed = ++s->routed;
  s->least_loaded_routes += (uint64_t)least;
  s->contested += (uint64_t)contested;
}

/* Read every answered request (waiting up to timeout_ms for the first), and
 * kill retired replicas that have nothing outstanding any more. */
static void collect(service *s, int64_t timeout_ms) {
  if (s->nout) {
    rd_ref refs[MAX_OUT];
    uint8_t ready[MAX_OUT] = {0};
    for (size_t i = 0; i < s->nout; i++) refs[i] = s->out[i].ref;
    if (rd_wait(refs, s->nout, 1, timeout_ms, ready) > 0) {
      double t = ex_now() - s->t0;
      size_t keep = 0;
      for (size_t i = 0; i < s->nout; i++) {
        if (!ready[i]) {
          s->out[keep++] = s->out[i];
          continue;
        }
        rd_buf b;
        int r = rd_get(&s->out[i].ref, 1, &b, RD_TIMEOUT_INF);
        ex_result_hdr h;
        ex_result_rows(&b, r, 0, 384, &h, "a request");
        replica *rp = &s->rep[s->out[i].replica];
        rp->outstanding--, rp->served++, rp->busy += h.seconds;
        ex_series_add(&s->lat_window, (t - s->out[i].arrival) * 1000.0);
        ex_series_add(&s->lat_all, (t - s->out[i].arrival) * 1000.0);
        s->done++;
        rd_buf_release(&b);
        rd_ref_release(s->out[i].ref);
      }
      s->nout = keep;
    }
  } else if (timeout_ms > 0) {
    struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < s->nrep; i++)
    if (s->rep[i].live && s->rep[i].retiring && s->rep[i].outstanding == 0) {
      if (rd_actor_kill(s->rep[i].actor, 1) != 0) fprintf(stderr, "seed_elastic: could not stop replica %d\n", i);
      s->rep[i].live = 0;
    }
}

static void report(service *s, double t, double rate) {
  char load[256] = "";
  size_t off = 0;
  for (int i = 0; i < s->nrep && off < sizeof(load) - 16; i++)
    if (s->rep[i].live)
      off += (size_t)snprintf(load + off, sizeof(load) - off, "%s%d%s", off ? "," : "", s->rep[i].outstanding,
                              s->rep[i].retiring ? "r" : "");
  printf("t=%.0f rate=%.1f replicas=%d outstanding=[%s] p50_ms=%.1f p99_ms=%.1f done=%zu\n", t, rate,
         active_replicas(s), load, ex_percentile(&s->lat_window, 0.5), ex_percentile(&s->lat_window, 0.99),
         s->lat_window.n);
  fflush(stdout);
  s->lat_window.n = 0;
}

typedef struct phase {
  int replicas;
  double rate, seconds;
} phase;

static int parse_schedule(const char *spec, phase *ph) {
  int n = 0;
  const char *p = spec;
  while (*p) {
    char *end;
    if (n == MAX_PHASES) ex_die(2, "--schedule: at most %d phases", MAX_PHASES);
    ph[n].replicas = (int)strtol(p, &end, 10);
    if (*end != ':') break;
    ph[n].rate = strtod(end + 1, &end);
    if (*end != ':') break;
    ph[n].seconds = strtod(end + 1, &end);
    if (ph[n].replicas < 1 || ph[n].replicas > MAX_REPLICAS || ph[n].rate <= 0 || ph[n].rate > 1000 ||
        ph[n].seconds <= 0)
      break;
    n++;
    if (*end == 0) return n;
    if (*end != ',') break;
    p = end + 1;
  }
  ex_die(2, "--schedule %s: give replicas:rate:seconds,... (replicas 1..%d, rate and seconds positive)", spec,
         MAX_REPLICAS);
}

int main(int argc, char **argv) {
  ex_set_prog("seed_elastic");
  const char *schedule = "1:4:4,3:30:6,1:4:4", *corpus = "fortunes";
  int per = 8;
  service s;
  memset(&s, 0, sizeof(s));
  s.threads = 1;
  s.cpus = 0.5;
  s.model = ex_model_dir();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && v && ++i)
    if (OPT("--schedule")) schedule = v;
    else if (OPT("--texts-per-request")) per = atoi(v);
    else if (OPT("--cpus-per-replica")) s.cpus = atof(v);
    else if (OPT("--threads-per-replica")) s.threads = atoi(v);
    else if (OPT("--model")) s.model = v;
    else if (OPT("--corpus")) corpus = v;
    else {
      fprintf(stderr, "usage: seed_elastic [--schedule R:RATE:S,...] [--texts-per-request N] [--cpus-per-replica F]\n"
                      "                    [--threads-per-replica N] [--model DIR] [--corpus wordnet|fortunes|PATH]\n");
      return 2;
    }
#undef OPT
  }
  phase ph[MAX_PHASES];
  int nph = parse_schedule(schedule, ph), most = 0;
  for (int i = 0; i < nph; i++) most = ph[i].replicas > most ? ph[i].replicas : most;
  if (per < 1 || per > EX_MAX_TEXTS || s.cpus < 0 || s.threads < 1)
    ex_die(2, "bad option value (texts per request 1..%d, threads positive, cpus not negative)", EX_MAX_TEXTS);
  /* in a worker this never returns: workers serve the Embedder actor */
  int r = rd_init(NULL);
  if (r != 0) ex_die(1, "rd_init: %s", rd_strerror(r));
  rd_node_info ni;
  if ((r = rd_node_info_get(&ni)) != 0) ex_die(1, "rd_node_info_get: %s", rd_strerror(r));
  if (s.cpus * most > ni.num_cpus + 1e-9)   /* a replica that cannot be placed would never answer */
    ex_die(2, "%d replicas x %.2f CPUs do not fit the node's %.0f CPUs (lower --cpus-per-replica)", most, s.cpus,
           ni.num_cpus);
  ex_corpus c = {0};
  ex_corpus_load(&c, corpus, NULL);

  uint64_t k = 0;
  int max_seen = 0;
  s.t0 = ex_now();
  double phase_start = 0, next_report = 1;
  for (int p = 0; p < nph; p++) {
    scale(&s, ph[p].replicas);
    double end = phase_start + ph[p].seconds, next = phase_start;
    for (;;) {
      double t = ex_now() - s.t0;
      if (t >= next_report) {
        report(&s, next_report, ph[p].rate);
        next_report += 1;
      }
      int act = active_replicas(&s);
      if (act > max_seen) max_seen = act;
      if (t >= end) break;
      while (next <= t && next < end && s.nout < MAX_OUT) {   /* every request due by now */
        send_request(&s, &c, k++, per, next);
        next += 1.0 / ph[p].rate;
      }
      double until = next < next_report ? next : next_report;
      if (until > end) until = end;
      int64_t ms = (int64_t)((until - (ex_now() - s.t0)) * 1000.0) + 1;
      collect(&s, ms > 0 ? ms : 0);
    }
    phase_start = end;
  }
  while (s.nout) collect(&s, RD_TIMEOUT_INF);
  double wall = ex_now() - s.t0;
  int final = active_replicas(&s);
  printf("summary: requests=%llu routed=%llu least_loaded=%llu contested=%llu max_replicas=%d final_replicas=%d added=%llu "
         "removed=%llu p50_ms=%.1f p99_ms=%.1f seconds=%.1f\n",
         (unsigned long long)s.done, (unsigned long long)s.routed, (unsigned long long)s.least_loaded_routes, (unsigned long long)s.contested, max_seen,
         final, (unsigned long long)s.added, (unsigned long long)s.removed, ex_percentile(&s.lat_all, 0.5),
         ex_percentile(&s.lat_all, 0.99), wall);
  for (int i = 0; i < s.nrep; i++)
    printf("replica %d: served=%llu busy=%.2fs %s\n", i, (unsigned long long)s.rep[i].served, s.rep[i].busy,
           s.rep[i].live ? "live" : "removed");
  for (int i = 0; i < s.nrep; i++)
    if (s.rep[i].live && rd_actor_kill(s.rep[i].actor, 1) != 0) fprintf(stderr, "seed_elastic: could not stop replica %d\n", i);
  free(s.lat_window.v);
  free(s.lat_all.v);
  ex_corpus_free(&c);
  rd_shutdown();
  return s.routed == s.least_loaded_routes && s.done == s.routed ? 0 : 1;
}
