/* examples/trainer.h - data-parallel training of a classifier head over
 * all-MiniLM-L6-v2 embeddings with Trainer actors and an all-reduce through
 * the driver or among the workers (examples/trainer.c), shared by train_allreduce and
 * seed_trainer.  Examples only; not part of libraydist. */
#ifndef RD_EXAMPLES_TRAINER_H
#define RD_EXAMPLES_TRAINER_H

#include <raydist.h>
#include <stdint.h>

typedef struct ex_train_opts {
  const char *model, *fortunes, *save;
  int workers, epochs, batch, max_classes, min_class_size, threads, keep_attribution;
  int use_gpu;        /* workers run the engine on their granted GPU */
  int ring;           /* --allreduce ring: the workers all-reduce among themselves (rd_allreduce) */
  double lr, weight_decay, test_fraction;
  double cpus;        /* for the drivers' resource choice; -1 = not given */
  uint64_t seed;
} ex_train_opts;

/* The defaults documented in docs/examples.md. */
void ex_train_opts_init(ex_train_opts *o);
/* Take option a (with value v, may be NULL) if it is a training option:
 * returns the arguments used (1 or 2), 0 when a is not one. */
int ex_train_option(ex_train_opts *o, const char *a, const char *v);
/* Exit with status 2 and a message when a value is out of range. */
void ex_train_opts_check(const ex_train_opts *o);

/* Load the data, create o->workers Trainer actors with the actor options
 * *ao, train for o->epochs printing a line per epoch, save the head when
 * o->save, print the summary and kill the workers.  Returns 1 when the
 * workers' weights were identical after every epoch, else 0.  Exits with a
 * message when the data is missing or a worker fails. */
int ex_train(const ex_train_opts *o, const rd_actor_opts *ao);

#endif
