/* runtime/node.h - entry point of the node daemon (`raydist node`). */
#ifndef RD_RUNTIME_NODE_H
#define RD_RUNTIME_NODE_H

#include <stdint.h>

typedef struct rd_node_opts {
  const char *session_dir;        /* holds node.sock; 0700 */
  int64_t num_cpus;               /* fixed point */
  int64_t num_gpus;               /* fixed point; <0: detect with CUDA */
  uint64_t gpu_memory;            /* bytes of each GPU; 0: ask CUDA (unknown without a driver) */
  uint64_t memory;                /* bytes of memory budget */
  uint64_t store_bytes;
  uint64_t store_fallback_bytes;  /* past store_bytes, for objects that do not fit (objectstore/store.h); 0 none;
                                   * UINT64_MAX: half the memory (the cgroup's limit when it has one) */
  const char *spill_dir;          /* NULL or "" = no spilling */
  const char *custom_resources;   /* "name=amount,..." */
  const char *labels;             /* "key=value,..." (scheduler/labels.h), NULL: none */
  int prestart;                   /* workers started when the driver connects */
  int max_workers;
  int ready_fd;                   /* written "R" and closed once listening; -1 none */
  int embedded;                   /* exit when the driver disconnects; remove the session dir */
  int log_level;                  /* -1: from the environment */
  /* cluster membership (runtime/cluster.c); gcs_address NULL = run alone */
  const char *gcs_address;        /* "ip:port" of the GCS */
  const char *token_file;         /* the cluster token, owner-only */
  const char *node_ip;            /* this node's address for links and transfers */
  int is_head;
  int metrics_port;               /* Prometheus endpoint on node_ip (127.0.0.1 alone); 0 any, -1 off */
} rd_node_opts;

/* Run the daemon until shut down; returns the process exit code. */
int rd__node_main(const rd_node_opts *opts);

#endif
