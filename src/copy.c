/* src/copy.c - large copies into the store split across a few threads.
 *
 * One core's memcpy does not saturate the memory bus: a 100 MiB put copied by
 * two or more threads finishes sooner (Ray does the same).  Helper threads are
 * started on first use and live for the process; the caller copies one share
 * itself and returns when every share is done.  Small copies never come here. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define COPY_MAX_THREADS 8
#define COPY_MIN_BYTES (8u << 20)   /* below this one memcpy is as fast */

static struct {
  pthread_once_t once;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  int nthreads;            /* helpers, not counting the caller */
  uint64_t gen;            /* bumped for each job */
  char *dst;
  const char *src;
  size_t chunk, n;
  int next, pending;       /* share handed out next; shares not finished */
  int busy;                /* a job is in progress (one caller at a time) */
} C = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER};

static int shares(void) { return C.nthreads + 1; }

/* Copy share i of the current job. */
static void copy_share(int i) {
  size_t off = (size_t)i * C.chunk;
  if (off < C.n) memcpy(C.dst + off, C.src + off, C.n - off < C.chunk ? C.n - off : C.chunk);
}

static void *copy_thread(void *arg) {
  (void)arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&C.mu);
  for (;;) {
    while (C.gen == seen || C.next >= shares()) {
      if (C.gen != seen && C.next >= shares()) seen = C.gen;   /* nothing left of this job */
      pthread_cond_wait(&C.work, &C.mu);
    }
    seen = C.gen;
    int i = C.next++;
    pthread_mutex_unlock(&C.mu);
    copy_share(i);
    pthread_mutex_lock(&C.mu);
    if (--C.pending == 0) pthread_cond_broadcast(&C.done);
  }
  return NULL;
}

static void copy_init(void) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  const char *e = getenv("RAYDIST_COPY_THREADS");
  int want = e && *e ? atoi(e) : (int)(ncpu < 4 ? ncpu : 4);
  if (want > COPY_MAX_THREADS) want = COPY_MAX_THREADS;
  for (int i = 1; i < want; i++) {
    pthread_t th;
    if (pthread_create(&th, NULL, copy_thread, NULL) != 0) break;
    pthread_detach(th);
    C.nthreads++;
  }
}

void rd__copy(void *dst, const void *src, size_t n) {
  if (n < COPY_MIN_BYTES) {
    memcpy(dst, src, n);
    return;
  }
  pthread_once(&C.once, copy_init);
  pthread_mutex_lock(&C.mu);
  if (C.nthreads == 0 || C.busy) {   /* no helpers, or another thread copies: do it alone */
    pthread_mutex_unlock(&C.mu);
    memcpy(dst, src, n);
    return;
  }
  C.busy = 1;
  C.dst = dst;
  C.src = src;
  C.n = n;
  C.chunk = (n / (size_t)shares() + 4095) & ~(size_t)4095;
  C.next = 0;
  C.pending = shares();
  C.gen++;
  pthread_cond_broadcast(&C.work);
  for (;;) {   /* the caller takes shares too */
    if (C.next >= shares()) break;
    int i = C.next++;
    pthread_mutex_unlock(&C.mu);
    copy_share(i);
    pthread_mutex_lock(&C.mu);
    C.pending--;
  }
  while (C.pending > 0) pthread_cond_wait(&C.done, &C.mu);
  C.busy = 0;
  pthread_mutex_unlock(&C.mu);
}
