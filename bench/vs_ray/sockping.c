/* bench/vs_ray/sockping.c - the machine's Unix-socket round trip between two
 * processes: the physical floor under any task or actor round trip that
 * crosses a process boundary.  A parent and a forked child bounce 64 bytes
 * over a socketpair; it prints round trips per second (mean +- SD of the
 * timed trials after a warm-up, in microbench's line format) and the median
 * and p99 of one round trip in microseconds.  With --pin CPU both processes
 * run on that one CPU, which shows the cost of cross-CPU wake-ups (large in
 * virtual machines whose idle vCPUs halt).  A benchmark: it checks nothing.
 *   sockping [--duration S] [--trials N] [--pin CPU] [--json FILE] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 64
#define MAX_SAMPLES 4000000

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int full_io(int fd, char *buf, int writing) {
  size_t done = 0;
  while (done < MSG) {
    ssize_t n = writing ? write(fd, buf + done, MSG - done) : read(fd, buf + done, MSG - done);
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double *g_samples;
static long g_nsamples;

/* One trial of `secs` seconds; returns round trips per second. */
static double trial(int fd, double secs, int keep) {
  char buf[MSG];
  memset(buf, 'p', sizeof(buf));
  long n = 0;
  double t0 = now(), t;
  while ((t = now()) - t0 < secs) {
    if (full_io(fd, buf, 1) || full_io(fd, buf, 0)) {
      perror("sockping");
      exit(1);
    }
    if (keep && g_nsamples < MAX_SAMPLES) g_samples[g_nsamples++] = now() - t;
    n++;
  }
  return n / (now() - t0);
}

int main(int argc, char **argv) {
  double duration = 2.0;
  int trials = 3, pin = -1;
  const char *json = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--duration") && i + 1 < argc) duration = atof(argv[++i]);
    else if (!strcmp(argv[i], "--trials") && i + 1 < argc) trials = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!strcmp(argv[i], "--pin") && i + 1 < argc) pin = atoi(argv[++i]);
  }
  const char *name = pin >= 0 ? "unix_socket_round_trip_same_cpu" : "unix_socket_round_trip";
  if (pin >= 0) {   /* inherited by the child */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(pin, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      perror("sched_setaffinity");
      return 1;
    }
  }
  if (trials < 1) trials = 1;
  if (trials > 32) trials = 32;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    perror("socketpair");
    return 1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 1;
  }
  if (pid == 0) {   /* echo until the parent closes its end */
    close(sv[0]);
    char buf[MSG];
    while (full_io(sv[1], buf, 0) == 0 && full_io(sv[1], buf, 1) == 0) {
    }
    _exit(0);
  }
  close(sv[1]);
  g_samples = malloc(sizeof(double) * MAX_SAMPLES);
  if (!g_samples) return 1;
  (void)trial(sv[0], duration, 0);   /* warm-up */
  double v[32], mean = 0, sd = 0;
  for (int i = 0; i < trials; i++) mean += v[i] = trial(sv[0], duration, 1);
  mean /= trials;
  for (int i = 0; i < trials; i++) sd += (v[i] - mean) * (v[i] - mean);
  sd = trials > 1 ? sqrt(sd / (trials - 1)) : 0;
  close(sv[0]);
  waitpid(pid, NULL, 0);
  qsort(g_samples, (size_t)g_nsamples, sizeof(double), cmp_d);
  double p50 = g_samples[g_nsamples / 2] * 1e6, p99 = g_samples[(long)(g_nsamples * 0.99)] * 1e6;
  printf("%s per second %.2f +- %.2f\n", name, mean, sd);
  printf("%s latency p50 %.1f us p99 %.1f us (%ld samples, %d bytes)\n", name, p50, p99, g_nsamples, MSG);
  if (json) {
    FILE *f = fopen(json, "w");
    if (!f) {
      perror(json);
      return 1;
    }
    fprintf(f, "{\"name\": \"%s\", \"per_second\": %.3f, \"sd\": %.3f, "
               "\"p50_us\": %.3f, \"p99_us\": %.3f, \"samples\": %ld, \"bytes\": %d}\n",
            name, mean, sd, p50, p99, g_nsamples, MSG);
    fclose(f);
  }
  free(g_samples);
  return 0;
}
