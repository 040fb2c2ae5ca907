/* bench_engine.c - throughput of rd_engine on fixed shapes: batches of 1, 32
 * and 256 sequences of exactly 32 and 128 tokens ([CLS] + random WordPiece ids
 * + [SEP], fed pre-tokenized so tokenization is not timed, like bench_torch.py).
 * Prints sentences/s, tokens/s and achieved GEMM GFLOP/s per shape, on the CPU
 * with the given thread count and, with --device N, on CUDA device N.
 *
 * usage: bench_engine [--threads N] [--device N|-1] [--bf16] [--attn auto|fused|gemm|flash] [--min-time S]
 *                     [--batches 1,32,256] [--lens 32,128] [--model DIR]
 *                     [--pass-tokens N]   (tokens per forward pass, engine default)
 * Lines starting with "RESULT" are parsed by run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "raydist/error.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_list(const char *s, size_t *v, int max) {
  int n = 0;
  while (*s && n < max) {
    char *e;
    v[n++] = strtoul(s, &e, 10);
    s = *e == ',' ? e + 1 : e;
    if (e == s && *s) break;
  }
  return n;
}

/* --attn value: an rd_engine_attention, or -1 when unknown */
static int parse_attn(const char *v) {
  if (!strcmp(v, "auto")) return RD_ENGINE_ATTN_AUTO;
  if (!strcmp(v, "fused")) return RD_ENGINE_ATTN_FUSED;
  if (!strcmp(v, "gemm")) return RD_ENGINE_ATTN_GEMM;
  if (!strcmp(v, "flash")) return RD_ENGINE_ATTN_FLASH;
  return -1;
}

int main(int argc, char **argv) {
  int threads = 1, device = -1, bf16 = 0;
  int attn = RD_ENGINE_ATTN_AUTO;
  size_t pass_tokens = 0; /* engine default */
  double min_time = 2.0;
  size_t batches[8] = {1, 32, 256}, lens[8] = {32, 128};
  int nb = 3, nl = 2;
  const char *model = getenv("RD_MODEL_DIR");
  if (!model) model = RD_BENCH_MODEL_DIR;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--bf16")) bf16 = 1;
    else if (!strcmp(argv[i], "--attn") && i + 1 < argc && (attn = parse_attn(argv[i + 1])) >= 0) i++;
    else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
    else if (!strcmp(argv[i], "--batches") && i + 1 < argc) nb = parse_list(argv[++i], batches, 8);
    else if (!strcmp(argv[i], "--lens") && i + 1 < argc) nl = parse_list(argv[++i], lens, 8);
    else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else if (!strcmp(argv[i], "--pass-tokens") && i + 1 < argc) pass_tokens = strtoul(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: %s [--threads N] [--device N] [--bf16] [--attn auto|fused|gemm|flash] [--min-time S] "
                      "[--batches 1,32,256] [--lens 32,128] [--model DIR] [--pass-tokens N]\n", argv[0]);
      return 2;
    }
  }
  size_t maxb = 1, maxl = 2;
  for (int i = 0; i < nb; i++) maxb = batches[i] > maxb ? batches[i] : maxb;
  for (int i = 0; i < nl; i++) maxl = lens[i] > maxl ? lens[i] : maxl;

  rd_engine_config cfg;
  rd_engine_config_init(&cfg);
  char err[512] = "";
  cfg.model_dir = model;
  cfg.device = device;
  cfg.threads = threads;
  cfg.max_batch = maxb;
  cfg.max_seq_len = maxl;
  cfg.max_tokens_per_pass = pass_tokens;
  cfg.precision = bf16 ? RD_ENGINE_BF16 : RD_ENGINE_FP16;
  cfg.attention = (rd_engine_attention)attn;
  cfg.errbuf = err;
  cfg.errbuf_len = sizeof err;
  rd_engine *e = NULL;
  int rc = rd_engine_open(&cfg, &e);
  if (rc) {
    fprintf(stderr, "bench_engine: open failed (%d): %s\n", rc, err);
    return 1;
  }
  char path[48] = "cpu";
  rd_engine_stats st0;
  (void)rd_engine_stats_get(e, &st0);
  static const char *const attn_name[] = {"auto", "fused", "GEMM", "flash"};
  const char *used = attn_name[st0.attention >= 0 && st0.attention <= 3 ? st0.attention : 0];
  if (device >= 0) /* the attention kernel in the name when it was asked for */
    snprintf(path, sizeof path, "gpu-%s%s", bf16 ? "bf16" : "fp16",
             attn == RD_ENGINE_ATTN_AUTO                ? ""
             : st0.attention == RD_ENGINE_ATTN_FLASH    ? "-flash"
             : st0.attention == RD_ENGINE_ATTN_FUSED    ? "-fused"
                                                        : "-gemmattn");
  const char *ge = getenv("RD_GPU_GELU_EPILOGUE"); /* bias + GELU in the FFN-in GEMM (cublasLt) */
  if (device >= 0 && ge && *ge && strcmp(ge, "0")) strncat(path, "-ltgelu", sizeof path - strlen(path) - 1);
  const char *tr = getenv("RD_GPU_T_RESIDUAL"); /* the residual stream in fp16/bf16 */
  if (device >= 0 && tr && *tr && strcmp(tr, "0")) strncat(path, "-tres", sizeof path - strlen(path) - 1);
  size_t D = rd_engine_dim(e);
  int32_t *ids = malloc(maxb * maxl * sizeof *ids);
  const int32_t **ptr = malloc(maxb * sizeof *ptr);
  size_t *n_ids = malloc(maxb * sizeof *n_ids);
  float *out = malloc(maxb * D * sizeof *out);
  unsigned seed = 12345;
  for (size_t i = 0; i < maxb * maxl; i++) {
    seed = seed * 1103515245u + 12345u;
    ids[i] = 1996 + (int32_t)((seed >> 8) % 27000u); /* ordinary word pieces */
  }
  printf("# rd_engine %s, threads %d, model %s%s%s%s\n", path, threads, model, device < 0 ? "" : ", ",
         device < 0 ? "" : used, device < 0 ? "" : " attention");
  printf("# %-16s %5s %5s %12s %12s %10s %8s\n", "path", "batch", "seq", "sentences/s", "tokens/s",
         "GEMM GF/s", "iters");
  for (int li = 0; li < nl; li++) {
    for (int bi = 0; bi < nb; bi++) {
      size_t B = batches[bi], L = lens[li];
      for (size_t b = 0; b < B; b++) {
        int32_t *row = ids + b * maxl;
        row[0] = 101;
        row[L - 1] = 102;
        ptr[b] = row;
        n_ids[b] = L;
      }
      /* warm-up (touches the workspace, lets a GPU pick its GEMM kernels for
       * the shapes that will be timed) */
      if ((rc = rd_engine_embed_ids(e, ptr, n_ids, device >= 0 ? B : B < 8 ? B : 8, out))) goto fail;
      rd_engine_stats_reset(e);
      int iters = 0;
      double t0 = now_s(), el;
      do {
        if ((rc = rd_engine_embed_ids(e, ptr, n_ids, B, out))) goto fail;
        iters++;
        el = now_s() - t0;
      } while (el < min_time && iters < 1000);
      rd_engine_stats st;
      (void)rd_engine_stats_get(e, &st);
      double sps = (double)B * iters / el, tps = sps * (double)L;
      printf("  %-16s %5zu %5zu %12.1f %12.0f %10.1f %8d\n", path, B, L, sps, tps,
             st.gemm_flops / el / 1e9, iters);
      printf("RESULT impl=c path=%s threads=%d batch=%zu seq=%zu sent_s=%.3f tok_s=%.1f gemm_gflops=%.2f\n",
             path, threads, B, L, sps, tps, st.gemm_flops / el / 1e9);
      fflush(stdout);
    }
  }
  rd_engine_close(e);
  free(ids);
  free(ptr);
  free(n_ids);
  free(out);
  return 0;
fail:
  fprintf(stderr, "bench_engine: embed failed (%d): %s\n", rc, rd_engine_last_error(e));
  rd_engine_close(e);
  return 1;
}
