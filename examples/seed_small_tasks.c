/* examples/seed_small_tasks.c - seed scenario 1: many small text tasks, each
 * holding a quarter of a GPU, so that four share one GPU at a time.
 *
 * Every corpus item becomes one task (num_gpus 0.25, no CPU) that normalises
 * the text, counts its words and letters and hashes it, then holds its GPU
 * share for --task-ms (the stand-in for a small kernel).  Each task reports
 * the GPU it was granted and when it ran; the driver checks every result
 * against its own computation and, per GPU, the most tasks that ran at once,
 * which the scheduler's fractional-GPU accounting must keep at 1 / 0.25 = 4.
 * Without a GPU, --gpus N makes the node report N simulated GPUs (the
 * scheduler accounts for fractions without touching a device).  Nothing here
 * may run before rd_init(): this program is also its own workers.
 *
 *   seed_small_tasks [--gpus N] [--tasks N] [--task-ms MS] [--gpus-per-task F]
 *                    [--corpus wordnet|fortunes|PATH] */
#include <raydist.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "corpus.h"
#include "embedder.h"
#include "engine.h"

/* What a task computes from its text. */
typedef struct text_stats {
  uint32_t words, letters;
  uint64_t fnv;   /* FNV-1a 64 of the text lower-cased (ASCII) */
} text_stats;

static text_stats text_stats_of(const char *s, size_t n) {
  text_stats t = {0, 0, 0xcbf29ce484222325ull};
  int in_word = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
    int letter = c >= 'a' && c <= 'z', space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    t.letters += (uint32_t)letter;
    if (!space && !in_word) t.words++;
    in_word = !space;
    t.fnv = (t.fnv ^ c) * 0x100000001b3ull;
  }
  return t;
}

/* A task's result: its stats, its grant and when it held it. */
typedef struct task_result {
  text_stats st;
  int32_t pid, gpu, ngpus, pad;
  double fraction, start, end;   /* monotonic seconds: one clock for every process of the node */
} task_result;

/* text_task(text, hold_ms: int) -> task_result */
RD_REMOTE(text_task) {
  rd_buf text, ms;
  if (rd_call_nargs(call) != 2 || rd_arg(call, 0, &text) != 0 || rd_arg(call, 1, &ms) != 0 || ms.size != sizeof(int))
    return rd_call_fail(call, "text_task takes (text, hold_ms)");
  task_result r;
  memset(&r, 0, sizeof(r));
  r.start = ex_now();
  int ids[4];
  double fr[4];
  r.ngpus = rd_call_gpu_ids(call, ids, fr, 4);
  r.gpu = r.ngpus > 0 ? ids[0] : -1;
  r.fraction = r.ngpus > 0 ? fr[0] : 0;
  r.st = text_stats_of(text.data, text.size);
  int hold;
  memcpy(&hold, ms.data, sizeof(hold));
  struct timespec ts = {hold / 1000, (long)(hold % 1000) * 1000000L};
  nanosleep(&ts, NULL);   /* the GPU share is held while "the kernel" runs */
  r.pid = (int32_t)getpid();
  r.end = ex_now();
  return rd_return_bytes(call, 0, &r, sizeof(r));
}

/* The most tasks of gpu `g` whose [start, end) intervals overlap. */
static int peak_concurrency(const task_result *res, size_t n, int g) {
  int peak = 0;
  for (size_t i = 0; i < n; i++) {
    if (res[i].gpu != g) continue;
    int c = 0;   /* tasks running at the moment task i started (the peak is at some start) */
    for (size_t j = 0; j < n; j++)
      if (res[j].gpu == g && res[j].start <= res[i].start && res[j].end > res[i].start) c++;
    if (c > peak) peak = c;
  }
  return peak;
}

typedef struct opts {
  const char *corpus;
  int gpus, tasks, task_ms;
  double frac;
} opts;

static void usage(void) {
  fprintf(stderr, "usage: seed_small_tasks [--gpus N] [--tasks N] [--task-ms MS] [--gpus-per-task F]\n"
                  "                        [--corpus wordnet|fortunes|PATH]\n");
  exit(2);
}

int main(int argc, char **argv) {
  ex_set_prog("seed_small_tasks");
  opts o = {"fortunes", -1, 200, 50, 0.25};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && v && ++i)
    if (OPT("--gpus")) o.gpus = atoi(v);
    else if (OPT("--tasks")) o.tasks = atoi(v);
    else if (OPT("--task-ms")) o.task_ms = atoi(v);
    else if (OPT("--gpus-per-task")) o.frac = atof(v);
    else if (OPT("--corpus")) o.corpus = v;
    else usage();
#undef OPT
  }
  if (o.gpus < -1 || o.gpus > 64 || o.tasks < 1 || o.task_ms < 0 || o.task_ms > 60000 || !(o.frac > 0 && o.frac <= 1))
    ex_die(2, "bad option value (gpus 0..64, tasks positive, task-ms 0..60000, gpus-per-task in (0, 1])");
  /* real GPUs when there are some and --gpus is not given; else simulated */
  int real = rd_engine_device_count();
  rd_config cfg;
  rd_config_init(&cfg);
  int sim = o.gpus >= 0 || real == 0;
  if (sim) cfg.num_gpus = o.gpus >= 0 ? o.gpus : 1;
  /* in a worker this never returns: workers run text_task */
  int r = rd_init(&cfg);
  if (r != 0) ex_die(1, "rd_init: %s", rd_strerror(r));
  rd_node_info ni;
  if ((r = rd_node_info_get(&ni)) != 0) ex_die(1, "rd_node_info_get: %s", rd_strerror(r));
  int ngpu = (int)ni.num_gpus;
  if (ngpu < 1) ex_die(2, "the node has no GPU: give --gpus N to simulate N");
  int limit = (int)(1.0 / o.frac + 1e-9);   /* tasks one GPU can hold at once */

  ex_corpus c = {0};
  ex_corpus_load(&c, o.corpus, NULL);
  printf("small_tasks: tasks=%d gpus=%d (%s) gpus_per_task=%.4g limit_per_gpu=%d task_ms=%d\n", o.tasks, ngpu,
         sim ? "simulated" : "detected", o.frac, limit, o.task_ms);
  fflush(stdout);

  rd_task_opts to;
  rd_task_opts_init(&to);
  to.num_cpus = 0;   /* the GPU share is the only limit */
  to.num_gpus = o.frac;
  rd_ref *refs = calloc((size_t)o.tasks, sizeof(rd_ref));
  rd_buf *bufs = calloc((size_t)o.tasks, sizeof(rd_buf));
  task_result *res = calloc((size_t)o.tasks, sizeof(task_result));
  if (!refs || !bufs || !res) ex_die(1, "out of memory");
  double t0 = ex_now();
  for (int i = 0; i < o.tasks; i++) {
    const ex_item *it = &c.items[(size_t)i % c.n];
    r = rd_submit(text_task, RD_ARGS(rd_arg_bytes(it->text, it->len), rd_arg_bytes(&o.task_ms, sizeof(int))), &to,
                  &refs[i]);
    if (r != 0) ex_die(1, "cannot submit task %d: %s", i, rd_strerror(r));
  }
  r = rd_get(refs, (size_t)o.tasks, bufs, RD_TIMEOUT_INF);
  double wall = ex_now() - t0;
  int correct = 0, wrong = 0, failed = 0, bad_grant = 0;
  for (int i = 0; i < o.tasks; i++) {
    if (bufs[i].error || bufs[i].size != sizeof(task_result)) {
      if (!failed++) fprintf(stderr, "seed_small_tasks: task %d failed: %.*s\n", i, (int)bufs[i].size, (const char *)bufs[i].data);
    } else {
      memcpy(&res[i], bufs[i].data, sizeof(task_result));
      const ex_item *it = &c.items[(size_t)i % c.n];
      text_stats want = text_stats_of(it->text, it->len);
      if (!memcmp(&want, &res[i].st, sizeof(want))) correct++;
      else wrong++;
      if (res[i].ngpus != 1 || res[i].gpu < 0 || res[i].gpu >= ngpu || res[i].fraction < o.frac - 1e-4 ||
          res[i].fraction > o.frac + 1e-4)
        bad_grant++;
    }
    rd_buf_release(&bufs[i]);
    rd_ref_release(refs[i]);
  }
  int worst = 0;
  for (int g = 0; g < ngpu; g++) {
    int n = 0;
    for (int i = 0; i < o.tasks; i++) n += res[i].gpu == g && res[i].end > 0;
    int peak = peak_concurrency(res, (size_t)o.tasks, g);
    if (peak > worst) worst = peak;
    printf("gpu %d: tasks=%d peak_concurrent=%d%s\n", g, n, peak, peak > limit ? " OVER THE LIMIT" : "");
  }
  int ok = !failed && !wrong && !bad_grant && worst <= limit;
  printf("summary: tasks=%d correct=%d wrong=%d failed=%d bad_grants=%d gpus=%d max_concurrent_per_gpu=%d "
         "limit=%d seconds=%.2f tasks_per_s=%.1f ok=%s\n",
         o.tasks, correct, wrong, failed, bad_grant, ngpu, worst, limit, wall, o.tasks / (wall > 0 ? wall : 1),
         ok ? "yes" : "no");
  free(refs), free(bufs), free(res);
  ex_corpus_free(&c);
  rd_shutdown();
  return ok ? 0 : 1;
}
