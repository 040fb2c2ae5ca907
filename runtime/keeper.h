/* runtime/keeper.h - a small parent process that runs one of the cluster's
 * own daemons (the GCS server, the autoscaler) as its child, starts it
 * again when it dies, and owns its log file, which it rotates. */
#ifndef RD_KEEPER_H
#define RD_KEEPER_H

typedef struct rd_keeper_conf {
  const char *role;     /* "gcs", "autoscaler": its log lines and messages */
  int fixed_port;       /* needs --bind IP:PORT and --port-file: restarts bind the port the first child got */
  int alive;            /* the child writes to --alive-fd; RAYDIST_<ROLE>_HANG_MS of silence after it served
                           (10 s by default, 0: never) and it is killed and started again */
} rd_keeper_conf;

/* `raydist ROLE --supervise [--log-file PATH] [--ready-fd FD] ARGS...`:
 * runs `raydist ROLE ARGS... --ready-fd N` and restarts it when it dies
 * other than by a clean stop (exit status 0): 100 ms after a death, then
 * 200 ms doubling while it keeps dying within 10 s of starting, giving up
 * after 5 such in a row.  A child that never got ready (a bad argument,
 * port, store or config) is not restarted: its status is the keeper's.
 * Answers --ready-fd once the first child is ready.  SIGTERM/SIGINT go to
 * the child (SIGKILL after 10 s) and the keeper exits with its status; a
 * killed keeper takes the child with it (PR_SET_PDEATHSIG).
 *
 * With --log-file the keeper's stdout and stderr must be that file: the
 * child's (and whatever it runs) go through a pipe the keeper copies there,
 * and the keeper rotates the file by RAYDIST_ROTATION_MAX_BYTES and
 * RAYDIST_ROTATION_BACKUP_COUNT (log.h) at line ends, so that one process
 * renames it while every writer follows. */
int rd__keeper(int argc, char **argv, const rd_keeper_conf *conf);

#endif
