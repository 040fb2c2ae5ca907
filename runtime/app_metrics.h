/* runtime/app_metrics.h - application metrics (rd_metric_*) in the node
 * daemon: what its processes report, added up, served on /metrics. */
#ifndef RD_RUNTIME_APP_METRICS_H
#define RD_RUNTIME_APP_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "raydist.pb-c.h"

/* Series from one report (OwnerStats.app_metrics) of client, checked and added. */
void rd__app_metrics_add(Rd__AppMetric *const *m, size_t n, uint32_t client);
/* client (a driver or worker) is gone: its parts of gauge series go, and
 * a series with no part left with them (counters and histograms keep their
 * totals). */
void rd__app_metrics_client_gone(uint32_t client);
/* Their families, after the node's own (/metrics), with the
 * raydist_app_metric_series and raydist_app_metric_rejected_total ones. */
void rd__app_metrics_print(rd__mbuf *b);

#endif
