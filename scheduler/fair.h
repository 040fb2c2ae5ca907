/* scheduler/fair.h - fair share between jobs: weighted dominant shares.
 *
 * A job's share of a node is its dominant share (Ghodsi et al., "Dominant
 * Resource Fairness", NSDI 2011): the largest fraction it holds of the
 * node's CPUs, GPUs or memory, divided by the job's weight.  Custom
 * resources do not count.  Mechanism only: the node daemon decides when to
 * look (runtime/fair.c). */
#ifndef RD_SCHEDULER_FAIR_H
#define RD_SCHEDULER_FAIR_H

#include "resources.h"

/* a += sign * b, in the kinds a share counts (CPU, GPU, memory). */
void rd_fair_res_add(rd_resources *a, const rd_resources *b, int sign);

/* held's weighted dominant share of total (weight <= 0 counts as 1). */
double rd_fair_share(const rd_resources *total, const rd_resources *held, double weight);

/* Should job a give up `give` (one of its grants) so that job b can take
 * `take` (a request of b's that waits)?  1 when a's share after giving is
 * still at least b's share after taking: the move lowers the larger of the
 * two shares and never overshoots, so two jobs never trade a grant back and
 * forth.  0 when it would not, or give frees none of the CPU, GPU or memory
 * take asks for. */
int rd_fair_should_yield(const rd_resources *total, const rd_resources *a_held, double a_weight,
                         const rd_resources *give, const rd_resources *b_held, double b_weight,
                         const rd_resources *take);

#endif
