/* runtime/raydist_cli.c - the `raydist` command.
 *
 * `raydist node ...` runs a node daemon (rd_init starts one this way for an
 * embedded cluster; `raydist start` with --gcs for a cluster), `raydist gcs`
 * the global control store; `raydist start|status|stop` manage a cluster
 * (cli_cluster.c); `raydist version` prints the version. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autoscaler.h"
#include "cli_cluster.h"
#include "gcs.h"
#include "log.h"
#include "node.h"
#include "labels.h"
#include "resources.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: raydist node --session DIR [--num-cpus N] [--num-gpus N] [--gpu-memory BYTES] [--memory BYTES]\n"
          "                    [--object-store-memory BYTES] [--object-store-fallback BYTES] [--spill-dir DIR]\n"
          "                    [--resources a=1,b=2] [--labels k=v,k2=v2]\n"
          "                    [--prestart N] [--max-workers N] [--ready-fd FD] [--embedded] [--log-level L]\n"
          "                    [--gcs IP:PORT --token-file F --node-ip IP [--head]] [--metrics-port N]\n"
          "                    [--log-file F (its stdout and stderr, rotated: RAYDIST_ROTATION_MAX_BYTES)]\n"
          "       raydist start --head | --address IP:PORT [options]   (raydist start --help)\n"
          "       raydist status [--address IP:PORT] [--local]\n"
          "       raydist memory [--address IP:PORT] [--top N] [--local]   (objects in every node's store)\n"
          "       raydist list tasks|actors|workers|objects|nodes|placement-groups|jobs [--address IP:PORT] [--state S]\n"
          "                    [--limit N] [--local]   (raydist list, for the states)\n"
          "       raydist logs [GLOB] | actor --id ID | task --id ID | worker --pid P --node-ip IP [--tail N]\n"
          "                    [--err] [--follow] [--local]   (workers' output and the nodes' logs: raydist logs --help)\n"
          "       raydist stack [--pid P] [--node-ip IP] [--address IP:PORT] [--local]   (each thread's stack of the\n"
          "                    drivers and workers, as Ray's ray stack)\n"
          "         --local, or no --address and no cluster runs here: this machine's embedded clusters (rd_init\n"
          "         without an address), each under \"embedded node SESSION_DIR:\"\n"
          "       raydist stop [--node-ip IP]\n"
          "       raydist job submit|list|logs|wait|stop ...   (raydist job, for its usage)\n"
          "       raydist gcs --bind IP:PORT --token-file F [--ready-fd FD] [--storage memory|file:PATH]\n"
          "                    [--supervise [--log-file F]]   (a keeper restarts it; it rotates F)\n"
          "       raydist autoscaler --address IP:PORT --token-file F --config FILE [--ready-fd FD] [--pid-file F]\n"
          "                    [--supervise [--log-file F]]   (started so by\n"
          "                    raydist start --head --autoscaling-config FILE)\n"
          "       raydist version\n");
}

static int parse_qty(const char *s, int64_t *out) {
  char *end;
  double d = strtod(s, &end);
  if (*end || end == s) return -1;
  return rd_res_from_double(d, out) == 0 ? 0 : -1;
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || end == s || s[0] == '-') return -1;
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "gcs")) return rd__gcs_cli(argc, argv);
  if (!strcmp(argv[1], "autoscaler")) return rd__autoscaler_cli(argc, argv);
  if (!strcmp(argv[1], "version")) {
    printf("raydist 0.1.0\n");
    return 0;
  }
  if (!strcmp(argv[1], "start")) return rd__cli_start(argc, argv);
  if (!strcmp(argv[1], "status")) return rd__cli_status(argc, argv);
  if (!strcmp(argv[1], "memory")) return rd__cli_memory(argc, argv);
  if (!strcmp(argv[1], "list")) return rd__cli_list(argc, argv);
  if (!strcmp(argv[1], "logs")) return rd__cli_logs(argc, argv);
  if (!strcmp(argv[1], "stack")) return rd__cli_stack(argc, argv);
  if (!strcmp(argv[1], "stop")) return rd__cli_stop(argc, argv);
  if (!strcmp(argv[1], "job")) return rd__cli_job(argc, argv);
  if (strcmp(argv[1], "node") != 0) {
    fprintf(stderr, "raydist: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
  }
  rd_node_opts o;
  memset(&o, 0, sizeof(o));
  o.num_cpus = (int64_t)sysconf(_SC_NPROCESSORS_ONLN) * RD_RES_UNIT;
  o.num_gpus = -1;
  o.memory = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
  o.store_bytes = 512ull << 20;
  o.store_fallback_bytes = UINT64_MAX;   /* the node's default: half its memory (the cgroup's when limited) */
  o.prestart = -1;
  o.max_workers = 64;
  o.ready_fd = -1;
  o.log_level = -1;
  const char *log_file = NULL;
  const char *mp = getenv("RAYDIST_METRICS_PORT");   /* the default; --metrics-port overrides it */
  o.metrics_port = mp && *mp ? atoi(mp) : 0;
  static const struct option lo[] = {
      {"session", 1, 0, 's'},     {"num-cpus", 1, 0, 'c'},   {"num-gpus", 1, 0, 'g'},
      {"memory", 1, 0, 'm'},      {"object-store-memory", 1, 0, 'o'}, {"spill-dir", 1, 0, 'd'},
      {"resources", 1, 0, 'r'},   {"prestart", 1, 0, 'p'},   {"max-workers", 1, 0, 'w'},
      {"ready-fd", 1, 0, 'f'},    {"embedded", 0, 0, 'e'},   {"log-level", 1, 0, 'l'},
      {"gcs", 1, 0, 'G'},         {"token-file", 1, 0, 'T'}, {"node-ip", 1, 0, 'I'},
      {"head", 0, 0, 'H'},        {"metrics-port", 1, 0, 'M'}, {"gpu-memory", 1, 0, 'u'},
      {"labels", 1, 0, 'L'},      {"log-file", 1, 0, 'F'},   {"object-store-fallback", 1, 0, 'B'},
      {0, 0, 0, 0}};
  int ch;
  optind = 2;
  while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    int bad = 0;
    switch (ch) {
      case 's': o.session_dir = optarg; break;
      case 'c': bad = parse_qty(optarg, &o.num_cpus); break;
      case 'g': bad = parse_qty(optarg, &o.num_gpus); break;
      case 'm': bad = parse_u64(optarg, &o.memory); break;
      case 'o': bad = parse_u64(optarg, &o.store_bytes); break;
      case 'B': bad = parse_u64(optarg, &o.store_fallback_bytes); break;
      case 'd': o.spill_dir = optarg; break;
      case 'r': o.custom_resources = optarg; break;
      case 'p': o.prestart = atoi(optarg); break;
      case 'w': o.max_workers = atoi(optarg); break;
      case 'f': o.ready_fd = atoi(optarg); break;
      case 'e': o.embedded = 1; break;
      case 'l': o.log_level = atoi(optarg); break;
      case 'G': o.gcs_address = optarg; break;
      case 'T': o.token_file = optarg; break;
      case 'I': o.node_ip = optarg; break;
      case 'H': o.is_head = 1; break;
      case 'M': o.metrics_port = atoi(optarg); break;
      case 'u': bad = parse_u64(optarg, &o.gpu_memory); break;
      case 'L': o.labels = optarg; break;
      case 'F': log_file = optarg; break;
      default: usage(stderr); return 2;
    }
    if (bad) {
      const char *name = "?";
      for (const struct option *x = lo; x->name; x++)
        if (x->val == ch) name = x->name;
      fprintf(stderr, "raydist node: bad value '%s' for --%s\n", optarg, name);
      return 2;
    }
  }
  if (!o.session_dir) {
    fprintf(stderr, "raydist node: --session is required\n");
    return 2;
  }
  if (o.gcs_address && !o.token_file) {
    fprintf(stderr, "raydist node: --gcs needs --token-file\n");
    return 2;
  }
  char labels[RD_LABELS_LEN], why[200];
  if (rd_labels_canon(o.labels, labels, sizeof(labels), why, sizeof(why)) != 0) {
    fprintf(stderr, "raydist node: --labels: %s\n", why);
    return 2;
  }
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    fprintf(stderr, "raydist node: --metrics-port must be a port, 0 (any free one) or -1 (none)\n");
    return 2;
  }
  if (log_file && rd__log_rotation_init(log_file) != 0) return 2;   /* its stdout and stderr are that file */
  if (o.prestart < 0) o.prestart = (int)(o.num_cpus / RD_RES_UNIT);
  if (o.prestart < 1) o.prestart = 1;
  if (o.max_workers < 1) o.max_workers = 1;
  if (o.prestart > o.max_workers) o.prestart = o.max_workers;
  return rd__node_main(&o);
}
