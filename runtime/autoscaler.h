/* runtime/autoscaler.h - the cluster autoscaler (`raydist autoscaler`,
 * started by `raydist start --head --autoscaling-config FILE`), Ray's
 * autoscaler with a command-line node provider: it starts nodes of the
 * kinds its config names by running their launch command when requests
 * wait that no node has room for, and lets nodes it started go once they
 * have been idle for a while.  docs/autoscaler.md. */
#ifndef RD_RUNTIME_AUTOSCALER_H
#define RD_RUNTIME_AUTOSCALER_H

#include <stddef.h>
#include <stdint.h>

#include "autoscale.h"   /* RD_AS_MAX_TYPES */
#include "labels.h"
#include "resources.h"

typedef struct rd_as_type_conf {
  char name[64];
  rd_resources res;
  char labels[RD_LABELS_LEN];   /* its own, canonical, with raydist.io/node-type=name added */
  int min_workers, max_workers;
  uint64_t idle_timeout_ms;     /* idle_timeout_s in its section (0: the global one) */
  char launch[2048];            /* sh -c: starts one node (`raydist start --address "$RAYDIST_ADDRESS" ...`) */
  char terminate[2048];         /* sh -c after one left (optional: "" none) */
} rd_as_type_conf;

typedef struct rd_as_config {
  rd_as_type_conf types[RD_AS_MAX_TYPES];
  size_t ntypes;
  uint64_t idle_timeout_ms;     /* idle_timeout_s: a node idle this long goes (default 60 s) */
  uint64_t launch_timeout_ms;   /* launch_timeout_s: a launch whose node has not joined by then failed (120 s) */
  uint64_t interval_ms;         /* interval_ms: one round this often (1000) */
  int max_launch;               /* max_launch_batch: nodes started in one round (5) */
  double upscaling_speed;       /* upscaling_speed: starting at once at most max(5, this x nodes) (1; 0: no limit) */
} rd_as_config;

/* Reads the config file at path: 0, or RD_EINVAL / RD_EIO with the reason
 * (and the line) in err. */
int rd__as_config_load(const char *path, rd_as_config *c, char *err, size_t errlen);

/* `raydist autoscaler --address IP:PORT --token-file PATH --config FILE
 * [--ready-fd FD] [--log-level L] [--pid-file PATH]`: runs until SIGTERM or
 * SIGINT.  With --supervise [--log-file F] it is a keeper (keeper.h) that
 * runs the autoscaler as its child and starts it again when it dies. */
int rd__autoscaler_cli(int argc, char **argv);

/* The KV namespace and key where the autoscaler keeps its status text
 * (`raydist status` prints it). */
#define RD_AS_KV_NS "raydist.autoscaler"
#define RD_AS_KV_STATUS "status"
/* ... and the room rd_request_resources asks for: a bundle a line, in the
 * config's resources syntax ("" or absent: none). */
#define RD_AS_KV_REQUESTED "requested"
#define RD_AS_REQ_MAX 1000   /* bundles read (RD_REQUEST_MAX) */
/* ... and what a restarted autoscaler needs back: the next launch id, its
 * counts, and the launches whose node has not left (autoscaler.c). */
#define RD_AS_KV_STATE "launches"

#endif
