/* runtime/job_log.h - a submitted job's log (`raydist job`), rotated
 * without moving a reader's offsets.
 *
 * The job's keeper (cli_job.c) copies what the program writes to its
 * stdout and stderr (a pipe) into segment files in the job's directory,
 * each named by where it starts in the job's whole output: log.0, then
 * log.<N> once log.0 held about RAYDIST_ROTATION_MAX_BYTES, and so on.
 * `log` is a symbolic link to the segment being written, so `cat log` and
 * `tail -F log` show the newest.  A segment is cut at the end of a line
 * (a '\n' or '\r') once it is past the limit, or mid-line only past twice
 * the limit; RAYDIST_ROTATION_BACKUP_COUNT older segments are kept beside
 * the newest, the older ones removed.  An offset into the log (what
 * `job logs`, `--follow` and the tool link ask from) counts the bytes the
 * job wrote before it, so it stays valid across rotations: what was
 * removed is skipped and said so, never read twice or out of order. */
#ifndef RD_JOB_LOG_H
#define RD_JOB_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef struct rd_job_log {
  char dir[800];            /* the job's directory */
  int fd;                   /* the segment being written (-1: none could be made) */
  uint64_t start, size;     /* its first byte in the job's whole output; bytes in it */
  uint64_t max_bytes;       /* RAYDIST_ROTATION_MAX_BYTES (0: never rotated) */
  int backups;              /* RAYDIST_ROTATION_BACKUP_COUNT */
} rd_job_log;

/* Makes log.0 and the link `log` to it in dir: the segment's fd (also in
 * l->fd), or -1 with errno. */
int rd__job_log_open(rd_job_log *l, const char *dir, uint64_t max_bytes, int backups);

/* Copies the program's output from pipe fd in into the log, rotating it,
 * until the program (pid, a child of ours leading its process group;
 * SIGCHLD blocked and read from signal fd sfd) has exited and what it
 * wrote before is copied: its wait status.  Any other signal read from sfd
 * (SIGTERM, SIGINT, SIGHUP to the keeper) ends the program's group:
 * SIGTERM, SIGKILL on the next one; *stop_sig is the first such signal (0:
 * none).  Then rd__job_log_rest for what its children write later. */
int rd__job_log_pump(rd_job_log *l, int in, int sfd, int pid, int *stop_sig);

/* Copies the rest of pipe in until no one holds its write end. */
void rd__job_log_rest(rd_job_log *l, int in);

/* Up to len bytes of the log in job directory dir from *off (the bytes the
 * job wrote before them) into buf: how many (0: none yet), *off moved past
 * them; bytes from *off on that rotation had removed are skipped, their
 * count added to *dropped. */
size_t rd__job_log_read(const char *dir, uint64_t *off, char *buf, size_t len, uint64_t *dropped);

/* How many bytes the job in dir has written so far (0: no log yet). */
uint64_t rd__job_log_end(const char *dir);

#endif
