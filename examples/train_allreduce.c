/* examples/train_allreduce.c - data-parallel training with actors: a softmax
 * classifier head (dim -> C classes) over all-MiniLM-L6-v2 embeddings,
 * trained by N worker actors that each hold a shard of the data (the
 * training itself is examples/trainer.c, shared with seed_trainer).
 *
 * The data set is fortunes-min: a cookie's label is the fortune file it came
 * from.  The driver shuffles it with a fixed seed, holds out 20% for testing
 * and deals both splits round-robin to the workers, which embed their shards
 * with the engine in their constructors.  Each step every worker returns the
 * gradient of the cross-entropy summed over its minibatch, the driver
 * averages them (the all-reduce) and sends the same update to every worker,
 * which applies it with Adam: the workers' weights must stay bit-identical,
 * and the driver checks a checksum of them every epoch.  The trained head is
 * saved in the format documented in docs/examples.md.  Nothing here may run
 * before rd_init(): this program is also its own worker processes.
 *
 *   train_allreduce [--workers N] [--epochs N] [--batch N] [--lr F] [--weight-decay F]
 *                   [--seed N] [--test-fraction F] [--max-classes N] [--min-class-size N]
 *                   [--save HEAD.bin] [--cpus-per-worker F] [--threads-per-worker N]
 *                   [--model DIR] [--fortunes DIR] [--keep-attribution] */
#include <raydist.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedder.h"
#include "trainer.h"

static void usage(void) {
  fprintf(stderr,
          "usage: train_allreduce [--workers N] [--epochs N] [--batch N] [--lr F] [--weight-decay F] [--seed N]\n"
          "                       [--test-fraction F] [--max-classes N] [--min-class-size N] [--save HEAD.bin]\n"
          "                       [--cpus-per-worker F] [--threads-per-worker N] [--model DIR] [--fortunes DIR]\n"
          "                       [--keep-attribution] [--allreduce driver|ring]\n");
  exit(2);
}

int main(int argc, char **argv) {
  ex_set_prog("train_allreduce");
  ex_train_opts o;
  ex_train_opts_init(&o);
  for (int i = 1; i < argc; i++) {
    int used = ex_train_option(&o, argv[i], i + 1 < argc ? argv[i + 1] : NULL);
    if (!used) usage();
    i += used - 1;
  }
  ex_train_opts_check(&o);
  /* in a worker this never returns: workers only serve the Trainer actor */
  int r = rd_init(NULL);
  if (r != 0) ex_die(1, "rd_init: %s", rd_strerror(r));
  /* each worker holds a CPU, or an equal part of the node when there are
   * more workers than CPUs (an actor that cannot be placed would wait for ever) */
  rd_node_info ni;
  if ((r = rd_node_info_get(&ni)) != 0) ex_die(1, "rd_node_info_get: %s", rd_strerror(r));
  if (o.cpus < 0)   /* rounded down: the node counts in 1/10000 CPU, and 3 x 0.6667 > 2 */
    o.cpus = ni.num_cpus >= o.workers ? 1.0 : floor(ni.num_cpus / o.workers * 1000) / 1000;
  if (o.cpus * o.workers > ni.num_cpus + 1e-9)
    ex_die(2, "%d workers x %.2f CPUs do not fit the node's %.0f CPUs (lower --cpus-per-worker)", o.workers, o.cpus,
        ni.num_cpus);
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  ao.num_cpus = o.cpus;
  int identical = ex_train(&o, &ao);
  rd_shutdown();
  return identical ? 0 : 1;
}
