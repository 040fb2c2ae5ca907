/* scheduler/fair.c - weighted dominant shares and the yield test between
 * two jobs (see fair.h). */
#include "fair.h"

static double frac(int64_t held, int64_t total) {
  if (total <= 0 || held <= 0) return 0.0;
  return (double)held / (double)total;
}

double rd_fair_share(const rd_resources *total, const rd_resources *held, double weight) {
  double s = frac(held->cpu, total->cpu);
  double g = frac(held->gpu, total->gpu);
  double m = frac(held->memory, total->memory);
  if (g > s) s = g;
  if (m > s) s = m;
  return s / (weight > 0 ? weight : 1.0);
}

void rd_fair_res_add(rd_resources *a, const rd_resources *b, int sign) {
  a->cpu += sign * b->cpu;
  a->gpu += sign * b->gpu;
  a->memory += sign * b->memory;
}

int rd_fair_should_yield(const rd_resources *total, const rd_resources *a_held, double a_weight,
                         const rd_resources *give, const rd_resources *b_held, double b_weight,
                         const rd_resources *take) {
  int frees = (take->cpu > 0 && give->cpu > 0) || (take->gpu > 0 && give->gpu > 0) ||
              (take->memory > 0 && give->memory > 0);
  if (!frees) return 0;
  rd_resources a_after = *a_held, b_after = *b_held;
  rd_fair_res_add(&a_after, give, -1);
  rd_fair_res_add(&b_after, take, +1);
  return rd_fair_share(total, &a_after, a_weight) >= rd_fair_share(total, &b_after, b_weight);
}
