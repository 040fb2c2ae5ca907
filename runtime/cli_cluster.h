/* runtime/cli_cluster.h - the cluster commands of `raydist` (cli_cluster.c). */
#ifndef RD_RUNTIME_CLI_CLUSTER_H
#define RD_RUNTIME_CLI_CLUSTER_H

#include <stddef.h>

int rd__cli_start(int argc, char **argv);
int rd__cli_stop(int argc, char **argv);
int rd__cli_status(int argc, char **argv);
/* raydist memory: every live node's store objects (its /objects page). */
int rd__cli_memory(int argc, char **argv);
int rd__cli_list(int argc, char **argv);
/* raydist logs: a node's log files, an actor's, a task's or a worker's output. */
int rd__cli_logs(int argc, char **argv);
/* raydist stack: each thread's stack of the drivers and workers of every
 * live node (or of one process), as each node's /api/stack gives them. */
int rd__cli_stack(int argc, char **argv);
/* `raydist job` (cli_job.c); rd__cli_jobs_stop ends the running jobs of a
 * node session (for `raydist stop`), returning how many. */
int rd__cli_job(int argc, char **argv);
int rd__cli_jobs_stop(const char *session_dir);
/* How many jobs of the node session run or wait (PENDING) now. */
int rd__cli_jobs_live(const char *session_dir);
/* Job id of the node session session_dir: its state as `job list` shows it
 * ("RUNNING", "FAILED (exit 3)", ...) into state, *ended; -1: no such job. */
int rd__cli_job_state(const char *session_dir, int id, char *state, size_t len, int *ended);
/* A job's record as `job list` reads it. */
typedef struct rd_cli_job {
  int id;
  char name[128];
  char cmd[1024];
  int pid;
  double start, end;          /* wall-clock seconds; end 0 while it runs */
  int ended, status, sig;     /* exit status, or the signal; sig -1: ended, how unknown */
  int stopped;                /* `job stop` ended it */
  char state[64];             /* "RUNNING", "SUCCEEDED", "FAILED (exit 3)", "STOPPED", "PENDING (waits for GPU=1)", ... */
  char resources[160];        /* what its driver holds while it runs, "CPU=1,GPU=1,name=2" ("" none) */
} rd_cli_job;
/* Job id of the node session session_dir into *out: 0, or -1 when there is none. */
int rd__cli_job_get(const char *session_dir, int id, rd_cli_job *out);
/* The session's job ids, ascending: how many (at most max). */
int rd__cli_job_ids(const char *session_dir, int *ids, int max);
/* The token of the cluster whose GCS is at address when it runs on this
 * machine: 0, or -1. */
int rd__cli_local_token(const char *address, char *out, size_t len);
/* A process's start time (clock ticks after boot), 0 when there is none;
 * *state gets its state letter ('Z': it has exited, not yet reaped). */
unsigned long long rd__proc_start_time(int pid, char *state);

#endif
