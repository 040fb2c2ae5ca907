/* examples/seed_trainer.c - seed scenario 2: a trainer with one worker actor
 * per GPU.  Each worker holds a whole GPU (num_gpus 1) and computes gradients
 * on its shard; the driver collects and averages them and every worker
 * applies the same update, so all end with identical weights.  The training
 * (a classifier head over all-MiniLM-L6-v2 embeddings of fortunes-min) is
 * examples/trainer.c, shared with train_allreduce, which places its workers
 * on CPUs instead.
 *
 * With real GPUs the workers run the engine on the GPU they were granted
 * (CUDA_VISIBLE_DEVICES); --gpus N instead makes the node report N simulated
 * GPUs (the workers then hold one each but compute on the CPU), and --gpus 0
 * places --workers workers on CPUs.  Nothing here may run before rd_init():
 * this program is also its own workers.
 *
 *   seed_trainer [--gpus N] [--workers N (with --gpus 0)] [train_allreduce's options] */
#include <raydist.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedder.h"
#include "engine.h"
#include "trainer.h"

int main(int argc, char **argv) {
  ex_set_prog("seed_trainer");
  ex_train_opts o;
  ex_train_opts_init(&o);
  o.epochs = 20;
  int gpus = -1, workers_given = 0;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--gpus") && v) {
      gpus = atoi(v), i++;
      continue;
    }
    int used = ex_train_option(&o, argv[i], v);
    if (!used) {
      fprintf(stderr, "usage: seed_trainer [--gpus N] [--workers N] [--epochs N] [--batch N] [--lr F] [--seed N]\n"
                      "                    [--save HEAD.bin] [--model DIR] [--fortunes DIR] (see train_allreduce)\n");
      return 2;
    }
    workers_given |= !strcmp(argv[i], "--workers");
    i += used - 1;
  }
  ex_train_opts_check(&o);
  if (gpus < -1 || gpus > 64) ex_die(2, "--gpus %d: give 0..64", gpus);
  int real = rd_engine_device_count();
  rd_config cfg;
  rd_config_init(&cfg);
  if (gpus >= 0) cfg.num_gpus = gpus;   /* simulated; -1 leaves detection to the node */
  /* in a worker this never returns: workers only serve the Trainer actor */
  int r = rd_init(&cfg);
  if (r != 0) ex_die(1, "rd_init: %s", rd_strerror(r));
  rd_node_info ni;
  if ((r = rd_node_info_get(&ni)) != 0) ex_die(1, "rd_node_info_get: %s", rd_strerror(r));
  int ngpu = (int)ni.num_gpus;
  rd_actor_opts ao;
  rd_actor_opts_init(&ao);
  if (ngpu > 0) {
    if (workers_given && o.workers != ngpu)
      ex_die(2, "--workers %d: a worker per GPU means %d here (or --gpus 0 for CPU workers)", o.workers, ngpu);
    o.workers = ngpu;
    ao.num_gpus = 1;
    ao.num_cpus = 0;   /* the GPU is what a worker holds */
    o.use_gpu = gpus < 0 && real > 0;
  } else {
    double cpus = ni.num_cpus / o.workers;
    ao.num_cpus = cpus >= 1 ? 1 : (double)(long)(cpus * 1000) / 1000;   /* the node counts 1/10000 CPU */
  }
  printf("seed_trainer: workers=%d each holding %s%s\n", o.workers,
         ngpu > 0 ? "1 GPU" : "CPUs", ngpu > 0 ? (o.use_gpu ? " (engine on the GPU)" : " (simulated: engine on the CPU)") : "");
  fflush(stdout);
  int identical = ex_train(&o, &ao);
  rd_shutdown();
  return identical ? 0 : 1;
}
