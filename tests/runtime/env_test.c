/* tests/runtime/env_test.c - environment variables of tasks' and actors'
 * worker processes (rd_task_opts.env, rd_actor_opts.env, and the job's:
 * rd_config.env, RAYDIST_ENV_VARS), on an embedded
 * cluster: each set runs in workers started with it, workers never mix
 * sets, bad sets are refused, an actor keeps its set across restarts, and
 * a set whose workers cannot start fails its tasks with the reason.
 * `env_test NAME` runs one case; the binary is re-executed as the workers. */
#include <raydist.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "embedded.h"

/* What the process saw at exec, before any code of the runtime ran. */
static char at_start[64];

/* Returns "pid|RD_ENV_A|RD_ENV_NODE|at_start", "-" for an unset one. */
RD_REMOTE(env_probe) {
  const char *a = getenv("RD_ENV_A"), *n = getenv("RD_ENV_NODE");
  char out[256];
  int len = snprintf(out, sizeof(out), "%d|%s|%s|%s", (int)getpid(), a ? a : "-", n ? n : "-", at_start);
  usleep(20000);   /* long enough that concurrent submits need several workers */
  return rd_return_bytes(call, 0, out, (size_t)len);
}

typedef struct probe {
  int pid;
  char a[64], node[64], start[64];
} probe;

/* Splits "pid|a|node|start" (fields may be empty). */
static probe parse_probe(const char *data, size_t size) {
  char s[256];
  snprintf(s, sizeof(s), "%.*s", (int)size, data);
  probe p;
  memset(&p, 0, sizeof(p));
  char *rest = s, *f[4];
  for (int i = 0; i < 4; i++) {
    f[i] = strsep(&rest, "|");
    CHECK(f[i] != NULL);
  }
  p.pid = atoi(f[0]);
  snprintf(p.a, sizeof(p.a), "%s", f[1]);
  snprintf(p.node, sizeof(p.node), "%s", f[2]);
  snprintf(p.start, sizeof(p.start), "%s", f[3]);
  return p;
}

static probe get_probe(rd_ref r) {
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e != 0) {
    fprintf(stderr, "env_probe: %s: %.*s\n", rd_err_name(e), (int)b.size, (const char *)b.data);
    exit(1);
  }
  probe p = parse_probe(b.data, b.size);
  rd_buf_release(&b);
  rd_ref_release(r);
  return p;
}

/* fn (env_probe, nested_probe) on a quarter CPU with env. */
static int submit_fn(const rd_function *fn, const char *const *env, rd_ref *out) {
  rd_task_opts o;
  rd_task_opts_init(&o);
  o.num_cpus = 0.25;
  o.env = env;
  return rd_submit(fn, RD_NO_ARGS, &o, out);
}

static int submit_probe(const char *const *env, rd_ref *out) { return submit_fn(env_probe, env, out); }

static void init_with_node_env(void) {
  /* the embedded node, and so every worker, inherits it (a worker runs
   * this too, before its rd_init: it must not set it over its own) */
  if (!getenv("RAYDIST_WORKER_ID")) setenv("RD_ENV_NODE", "node", 1);
  init_or_die(2);
}

/* Three sets and none, interleaved and concurrent: every task sees its own
 * set from the start of its process, the node's variables unless its set
 * replaces them, and no worker ever runs tasks of two sets. */
static int t_tasks(void) {
  init_with_node_env();
  static const char *const alpha[] = {"RD_ENV_A=alpha", "RD_ENV_AT_START=alpha", NULL};
  static const char *const beta[] = {"RD_ENV_A=beta", "RD_ENV_NODE=replaced", "RD_ENV_AT_START=beta", NULL};
  static const char *const empty_value[] = {"RD_ENV_A=", NULL};
  const char *const *sets[4] = {NULL, alpha, beta, empty_value};
  const char *want_a[4] = {"-", "alpha", "beta", ""};
  enum { ROUNDS = 12 };
  rd_ref r[ROUNDS * 4];
  for (int i = 0; i < ROUNDS; i++)
    for (int k = 0; k < 4; k++) CHECK_EQ(submit_probe(sets[k], &r[i * 4 + k]), 0);
  int pids[4][ROUNDS];
  for (int i = 0; i < ROUNDS; i++) {
    for (int k = 0; k < 4; k++) {
      probe p = get_probe(r[i * 4 + k]);
      pids[k][i] = p.pid;
      if (strcmp(p.a, want_a[k]) != 0) fprintf(stderr, "set %d: RD_ENV_A=%s\n", k, p.a);
      CHECK(!strcmp(p.a, want_a[k]));
      if (strcmp(p.node, k == 2 ? "replaced" : "node") != 0) fprintf(stderr, "set %d: RD_ENV_NODE=%s\n", k, p.node);
      CHECK(!strcmp(p.node, k == 2 ? "replaced" : "node"));
      CHECK(!strcmp(p.start, k == 1 ? "alpha" : k == 2 ? "beta" : "-"));
    }
  }
  /* no pid served two sets */
  int distinct = 0;
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < ROUNDS; i++) {
      int first = 1;
      for (int j = 0; j < i; j++) first &= pids[k][j] != pids[k][i];
      distinct += first;
      for (int k2 = 0; k2 < 4; k2++)
        for (int j = 0; k2 != k && j < ROUNDS; j++) CHECK(pids[k2][j] != pids[k][i]);
    }
  printf("%d tasks of 4 sets ran in %d workers, none shared between sets\n", ROUNDS * 4, distinct);
  /* the same set in another order is the same set, one pool: one at a
   * time, alternately in each order, they share a worker (two sets never
   * would, as above; a lease being given back as the next request comes
   * may start a new worker for one of them, so several rounds) */
  static const char *const alpha_swapped[] = {"RD_ENV_AT_START=alpha", "RD_ENV_A=alpha", NULL};
  int seen[2][6], shared = 0;
  for (int i = 0; i < 6; i++) {
    for (int k = 0; k < 2; k++) {
      rd_ref s;
      CHECK_EQ(submit_probe(k ? alpha_swapped : alpha, &s), 0);
      probe p = get_probe(s);
      CHECK(!strcmp(p.a, "alpha") && !strcmp(p.start, "alpha"));
      seen[k][i] = p.pid;
    }
  }
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 6; j++) shared |= seen[0][i] == seen[1][j];
  CHECK(shared);
  rd_shutdown();
  return 0;
}

/* ------------------------------------------------------------ actors */

static int env_actor_init(rd_call *call, void **state) {
  (void)call;
  *state = NULL;
  return 0;
}
static void env_actor_fini(void *state) { (void)state; }
RD_ACTOR_CLASS(EnvActor, env_actor_init, env_actor_fini)

RD_ACTOR_METHOD(EnvActor, probe) {
  (void)state;
  const char *a = getenv("RD_ENV_A");
  char out[256];
  int len = snprintf(out, sizeof(out), "%d|%s|%d|%s", (int)getpid(), a ? a : "-", rd_call_actor_restarts(call),
                     at_start);
  return rd_return_bytes(call, 0, out, (size_t)len);
}

/* Bad sets are refused at submit, with nothing submitted. */
static int t_errors(void) {
  init_or_die(1);
  static const char *const no_eq[] = {"JUSTANAME", NULL};
  static const char *const bad_name[] = {"1ABC=x", NULL};
  static const char *const dash[] = {"A-B=x", NULL};
  static const char *const reserved[] = {"RAYDIST_SESSION=/tmp", NULL};
  static const char *const cuda[] = {"CUDA_VISIBLE_DEVICES=0", NULL};
  static const char *const twice[] = {"A=1", "B=2", "A=3", NULL};
  static const char *const empty_name[] = {"=x", NULL};
  const char *const *bad[] = {no_eq, bad_name, dash, reserved, cuda, twice, empty_name};
  rd_ref r;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) CHECK_EQ(submit_probe(bad[i], &r), RD_EINVAL);
  /* 257 variables (as many as a job's env_vars, 256, are fine); one value
   * over 64 KiB */
  static char names[257][16];
  const char *many[258];
  for (int i = 0; i < 257; i++) {
    snprintf(names[i], sizeof(names[i]), "V%d=1", i);
    many[i] = names[i];
  }
  many[257] = NULL;
  CHECK_EQ(submit_probe(many, &r), RD_EINVAL);
  many[256] = NULL;
  CHECK_EQ(submit_probe(many, &r), 0);
  probe p = get_probe(r);
  CHECK(p.pid > 0);
  static char big[66000];
  memset(big, 'x', sizeof(big) - 1);
  memcpy(big, "BIG=", 4);
  const char *large[] = {big, NULL};
  CHECK_EQ(submit_probe(large, &r), RD_EINVAL);
  /* actors too */
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.env = reserved;
  rd_actor a;
  CHECK_EQ(rd_actor_create(EnvActor, RD_NO_ARGS, &ao, &a), RD_EINVAL);
  /* the node still serves */
  CHECK_EQ(submit_probe(NULL, &r), 0);
  p = get_probe(r);
  CHECK(!strcmp(p.a, "-"));
  rd_shutdown();
  return 0;
}

static void actor_probe(rd_actor a, int *pid, char *val, int *restarts, char *start) {
  rd_ref r;
  CHECK_EQ(rd_actor_call(a, EnvActor_probe, RD_NO_ARGS, NULL, &r), 0);
  probe p = get_probe(r);   /* its node field is the restart count */
  *pid = p.pid;
  snprintf(val, 64, "%s", p.a);
  *restarts = atoi(p.node);
  snprintf(start, 64, "%s", p.start);
}

/* An actor's process has its set from the start, and again after a
 * restart; a plain actor beside it does not. */
static int t_actor(void) {
  init_with_node_env();
  static const char *const set[] = {"RD_ENV_A=actor", "RD_ENV_AT_START=actor", NULL};
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.env = set;
  ao.max_restarts = 1;
  rd_actor a, plain;
  CHECK_EQ(rd_actor_create(EnvActor, RD_NO_ARGS, &ao, &a), 0);
  CHECK_EQ(rd_actor_create(EnvActor, RD_NO_ARGS, NULL, &plain), 0);
  int pid, pid2, ppid, restarts;
  char val[64], start[64];
  actor_probe(a, &pid, val, &restarts, start);
  CHECK(!strcmp(val, "actor") && !strcmp(start, "actor") && restarts == 0);
  actor_probe(plain, &ppid, val, &restarts, start);
  CHECK(!strcmp(val, "-") && !strcmp(start, "-"));
  CHECK(ppid != pid);
  CHECK_EQ(rd_actor_kill(a, 0), 0);   /* restartable */
  for (int i = 0;; i++) {
    rd_ref r;
    CHECK_EQ(rd_actor_call(a, EnvActor_probe, RD_NO_ARGS, NULL, &r), 0);
    rd_buf b;
    int e = rd_get(&r, 1, &b, 60000);
    rd_buf_release(&b);
    rd_ref_release(r);
    if (e == 0) break;
    CHECK(i < 50);   /* calls in flight at the kill fail; later ones reach the restarted actor */
    usleep(100000);
  }
  actor_probe(a, &pid2, val, &restarts, start);
  printf("actor pid %d, restarted as %d: RD_ENV_A=%s at start %s\n", pid, pid2, val, start);
  CHECK(pid2 != pid && restarts == 1);
  CHECK(!strcmp(val, "actor") && !strcmp(start, "actor"));
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  CHECK_EQ(rd_actor_kill(plain, 1), 0);
  rd_shutdown();
  return 0;
}

/* Workers of one set exit at start (the program does so when it sees
 * RD_ENV_DIE_AT_START): its tasks fail with the reason after a few tries,
 * not forever, and tasks without it still run. */
static int t_broken(void) {
  init_or_die(1);
  static const char *const die[] = {"RD_ENV_DIE_AT_START=1", NULL};
  rd_ref r;
  double t0 = now_s();
  CHECK_EQ(submit_probe(die, &r), 0);
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  printf("a task whose workers exit at start: %s after %.1f s: %.*s\n", rd_err_name(e), now_s() - t0,
         e ? (int)b.size : 0, e ? (const char *)b.data : "");
  CHECK(e != 0 && e != RD_ETIMEDOUT);
  CHECK(b.size > 0 && strstr((const char *)b.data, "status 3"));
  rd_buf_release(&b);
  rd_ref_release(r);
  CHECK_EQ(submit_probe(NULL, &r), 0);
  probe p = get_probe(r);
  CHECK(!strcmp(p.start, "-"));
  rd_shutdown();
  return 0;
}

/* ------------------------------------------------- the job's own set */

/* env_probe's answer from a task this task submits with no env of its own. */
RD_REMOTE(nested_probe) {
  rd_ref r;
  CHECK_EQ(submit_probe(NULL, &r), 0);
  rd_buf b;
  int e = rd_get(&r, 1, &b, 60000);
  if (e == 0) e = rd_return_bytes(call, 0, b.data, b.size);
  rd_buf_release(&b);
  rd_ref_release(r);
  return e;
}

static probe nested(const char *const *env) {
  rd_ref r;
  CHECK_EQ(submit_fn(nested_probe, env, &r), 0);
  return get_probe(r);
}

/* What a job's tasks and actors see with the job's set (rd_config.env or
 * RAYDIST_ENV_VARS, want_a its RD_ENV_A): plain tasks and actors have it
 * from their start, a task's own env replaces its variables of the same
 * name and keeps the rest, and a task's subtasks inherit their parent's. */
static void job_set_checks(const char *want_a) {
  rd_ref r;
  CHECK_EQ(submit_probe(NULL, &r), 0);
  probe p = get_probe(r);
  printf("a plain task: RD_ENV_A=%s at start %s, RD_ENV_NODE=%s\n", p.a, p.start, p.node);
  CHECK(!strcmp(p.a, want_a) && !strcmp(p.start, "job") && !strcmp(p.node, "node"));
  static const char *const own[] = {"RD_ENV_A=task", NULL};
  CHECK_EQ(submit_probe(own, &r), 0);
  p = get_probe(r);
  CHECK(!strcmp(p.a, "task") && !strcmp(p.start, "job"));
  rd_actor a;
  CHECK_EQ(rd_actor_create(EnvActor, RD_NO_ARGS, NULL, &a), 0);
  int pid, restarts;
  char val[64], start[64];
  actor_probe(a, &pid, val, &restarts, start);
  CHECK(!strcmp(val, want_a) && !strcmp(start, "job"));
  CHECK_EQ(rd_actor_kill(a, 1), 0);
  p = nested(NULL);
  printf("a plain task's subtask: RD_ENV_A=%s at start %s\n", p.a, p.start);
  CHECK(!strcmp(p.a, want_a) && !strcmp(p.start, "job"));
  static const char *const outer[] = {"RD_ENV_A=outer", NULL};
  p = nested(outer);
  printf("the subtask of a task with RD_ENV_A=outer: RD_ENV_A=%s at start %s\n", p.a, p.start);
  CHECK(!strcmp(p.a, "outer") && !strcmp(p.start, "job"));
}

/* A driver of 2 CPUs whose own set (rd_config.env) is the job's:
 * RD_ENV_A=job, RD_ENV_AT_START=job. */
static rd_config job_config(void) {
  static const char *const job[] = {"RD_ENV_A=job", "RD_ENV_AT_START=job", NULL};
  rd_config cfg;
  rd_config_init(&cfg);
  cfg.num_cpus = 2;
  cfg.object_store_bytes = 128u << 20;
  cfg.env = job;
  return cfg;
}

/* rd_config.env: refused when bad (rd_init fails, nothing started), else
 * the job's set. */
static int t_job(void) {
  if (!getenv("RAYDIST_WORKER_ID")) setenv("RD_ENV_NODE", "node", 1);
  rd_config cfg = job_config();
  static const char *const bad[] = {"RD_ENV_A=job", "RAYDIST_SESSION=/tmp", NULL};
  const char *const *job = cfg.env;
  cfg.env = bad;
  CHECK_EQ(rd_init(&cfg), RD_EINVAL);
  cfg.env = job;
  CHECK_EQ(rd_init(&cfg), 0);
  CHECK(getenv("RD_ENV_A") == NULL);   /* the driver's own environment is its own */
  job_set_checks("job");
  rd_shutdown();
  return 0;
}

/* RAYDIST_ENV_VARS in the driver's environment (as `raydist job submit
 * --env` and the jobs API set it): the variables it names, those unset
 * skipped; one a set may not hold refused. */
static int t_job_vars(void) {
  if (!getenv("RAYDIST_WORKER_ID")) {   /* a worker's come from its node */
    setenv("RD_ENV_NODE", "node", 1);
    setenv("RD_ENV_A", "from-vars", 1);
    setenv("RD_ENV_AT_START", "job", 1);
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    setenv("RAYDIST_ENV_VARS", "CUDA_VISIBLE_DEVICES,RD_ENV_A", 1);
    rd_config cfg;
    rd_config_init(&cfg);
    cfg.num_cpus = 2;
    CHECK_EQ(rd_init(&cfg), RD_EINVAL);
    setenv("RAYDIST_ENV_VARS", "RD_ENV_A,RD_ENV_UNSET,RD_ENV_AT_START", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
  }
  init_or_die(2);
  job_set_checks("from-vars");
  rd_shutdown();
  return 0;
}

/* The node prestarts a driver's workers with its own set (the driver says
 * it in its Hello), not plain ones it would never use: the driver's tasks
 * find them started, and no other worker starts for them. */
static int t_job_prestart(void) {
  rd_config cfg = job_config();
  cfg.num_prestart_workers = 2;
  CHECK_EQ(rd_init(&cfg), 0);
  rd_node_info ni;
  for (int i = 0; i < 500; i++) {   /* before any task: the prestarted pair, idle */
    CHECK_EQ(rd_node_info_get(&ni), 0);
    if (ni.num_idle_workers == 2) break;
    usleep(10000);
  }
  CHECK_EQ(ni.num_idle_workers, 2);
  rd_ref r[2];
  for (int k = 0; k < 20; k++) {   /* two at a time: both workers busy */
    for (int i = 0; i < 2; i++) CHECK_EQ(submit_probe(NULL, &r[i]), 0);
    for (int i = 0; i < 2; i++) {
      probe p = get_probe(r[i]);
      CHECK(!strcmp(p.a, "job") && !strcmp(p.start, "job"));
    }
  }
  CHECK_EQ(rd_node_info_get(&ni), 0);
  printf("workers after 40 tasks of the job's set: %d (%d idle)\n", ni.num_workers, ni.num_idle_workers);
  CHECK_EQ(ni.num_workers, 2);   /* the prestarted ones ran them all */
  rd_shutdown();
  return 0;
}

static const rd_test_case tests[] = {
    {"tasks", t_tasks}, {"errors", t_errors},       {"actor", t_actor},
    {"broken", t_broken}, {"job", t_job},           {"job_vars", t_job_vars},
    {"job_prestart", t_job_prestart},
};

int main(int argc, char **argv) {
  const char *s = getenv("RD_ENV_AT_START");
  snprintf(at_start, sizeof(at_start), "%s", s && *s ? s : "-");
  if (getenv("RD_ENV_DIE_AT_START") && getenv("RAYDIST_WORKER_ID")) _exit(3);
  return rd_test_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
