// bert.cu - CUDA back end of the engine (the dispatcher): device memory pools,
// weight upload, cuBLAS GEMMs and the per-layer kernel sequence, pinned
// double-buffered host staging and one stream per engine.  A pass runs one
// rd__stage (backend.h): from token ids or hidden rows, a range of layers,
// then pooled embeddings or hidden rows; the full forward pass is one stage.
//
// An engine binds one device and owns its stream, cuBLAS handle and memory; it
// never touches the device's global state (no cudaDeviceReset, no device
// flags), so several engines can share one GPU.  Every CUDA/cuBLAS failure is
// returned as RD_EGPU with a message; nothing here aborts.
#include <stdlib.h>
#include <string.h>

#include <new>

#include "../backend.h"
#include "../engine.h"
#include "norm_t.cuh"
#include "ops.cuh"

namespace {

// A bump allocator over one cudaMalloc: every device buffer of an engine comes
// from one of two pools (weights, activations), sized exactly at open.
struct dpool {
  char *base = nullptr;
  size_t size = 0, used = 0;
  void *take(size_t bytes) {
    size_t off = (used + 255) & ~(size_t)255;
    if (off + bytes > size) return nullptr;
    used = off + bytes;
    return base + off;
  }
  static size_t round(size_t bytes) { return (bytes + 255) & ~(size_t)255; }
};

// cublasLt's layouts of linear()'s operands, column-major: W [k x n] (used
// transposed), x [k x rows], y [n x rows]; destroyed with the object.
struct lt_layouts {
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  cublasStatus_t make(cudaDataType_t dt, uint64_t rows, uint64_t n, uint64_t k) {
    cublasStatus_t st = cublasLtMatrixLayoutCreate(&w, dt, k, n, (int64_t)k);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&x, dt, k, rows, (int64_t)k);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&y, dt, n, rows, (int64_t)n);
    return st;
  }
  ~lt_layouts() {
    if (w) cublasLtMatrixLayoutDestroy(w);
    if (x) cublasLtMatrixLayoutDestroy(x);
    if (y) cublasLtMatrixLayoutDestroy(y);
  }
};

// RD_GPU_PROFILE=1 in the environment times each op of every pass with
// stream events (which serialises passes) and prints per-op milliseconds per
// pass to stderr whenever the pass shape changes and at close.
enum prof_kind {
  P_EMBED, P_QKV, P_ATTN, P_SPLIT, P_SCORES, P_SOFTMAX, P_PV, P_MERGE, P_OPROJ, P_LN1, P_FFN1,
  P_GELU, P_FFN2, P_LN2, P_POOL, P_N
};
const char *const prof_name[P_N] = {
    "embed+ln", "qkv gemm", "attention kernel", "qkv split", "scores gemm", "softmax", "pv gemm",
    "merge heads", "out-proj gemm", "residual+ln 1", "ffn-in gemm", "bias+gelu", "ffn-out gemm",
    "residual+ln 2", "pool+l2"};
#define RD__PROF_EVENTS 256

struct dlayer {
  void *wqkv, *wo, *wi, *wo2;  // element type T
  float *bqkv, *bo, *ln1_g, *ln1_b, *bi, *bo2, *ln2_g, *ln2_b;
};

}  // namespace

struct rd__gpu {
  int device = 0, bf16 = 0;
  rd__bert_config c{};
  size_t max_tokens = 0, max_seq = 0, max_batch = 0, esz = 2;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  // RD_GPU_GELU_EPILOGUE=1: the FFN-in GEMM adds the bias and applies GELU in
  // cublasLt's epilogue (tanh GELU) instead of a kernel of its own
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t lt_gelu = nullptr;
  // RD_GPU_T_RESIDUAL=1: the residual stream is xh (T), not x32 (norm_t.cuh);
  // x32 holds it widened only where a stage ends
  int t_resid = 0;
  dpool wpool, apool;
  float *word = nullptr, *pos = nullptr, *type = nullptr, *emb_g = nullptr, *emb_b = nullptr;
  dlayer layer[RD__BERT_MAX_LAYERS]{};
  int32_t *ids_d = nullptr, *lens_d = nullptr;
  float *x32 = nullptr, *scores = nullptr, *out_d = nullptr;
  void *xh = nullptr, *qkv = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *ctx = nullptr,
       *ffn = nullptr, *probs = nullptr, *cublas_ws = nullptr;
  size_t cublas_ws_size = 32u << 20;
  int32_t *ids_h[2]{}, *lens_h[2]{};
  float *out_h[2]{};
  cudaEvent_t done[2]{};
  float **dest[2]{};
  size_t pending[2]{};
  int slot = 0;
  // Stage passes that take or give hidden rows stage them here (max_tokens x
  // hidden fp32, pinned, allocated on the first such pass); hid_ev marks the
  // last copy that used it.
  float *hid_h = nullptr;
  cudaEvent_t hid_ev = nullptr;
  int hid_used = 0;
  size_t host_bytes = 0;
  int fused = 0;  // attention in one kernel, no score buffers: rd__cuda_attention, or
  int flash = 0;  // rd__cuda_flash when this is set too (RD_ENGINE_ATTN_FLASH)
  // profile (RD_GPU_PROFILE): events of the current pass and per-kind totals
  int prof = 0, pn = 0, pB = 0, pL = 0;
  unsigned long ppasses = 0;
  cudaEvent_t pev[RD__PROF_EVENTS]{};
  int pkind[RD__PROF_EVENTS]{};
  double pms[P_N]{};
};

static void prof_mark(rd__gpu *g, int kind) {
  if (!g->prof || g->pn >= RD__PROF_EVENTS) return;
  cudaEventRecord(g->pev[g->pn], g->stream);
  g->pkind[g->pn++] = kind;
}

static void prof_dump(rd__gpu *g) {
  if (!g->ppasses) return;
  double tot = 0;
  for (int k = 0; k < P_N; k++) tot += g->pms[k];
  fprintf(stderr, "# gpu profile %s %s attention%s%s, %d x %d tokens, %lu passes: %.3f ms per pass\n",
          g->bf16 ? "bf16" : "fp16", g->flash ? "flash" : g->fused ? "fused" : "gemm",
          g->lt_gelu ? ", GELU in the GEMM epilogue" : "", g->t_resid ? ", residual in T" : "", g->pB, g->pL, g->ppasses,
          tot / (double)g->ppasses);
  for (int k = 0; k < P_N; k++)
    if (g->pms[k] > 0)
      fprintf(stderr, "#   %-16s %9.4f ms %5.1f%%\n", prof_name[k], g->pms[k] / (double)g->ppasses,
              100.0 * g->pms[k] / tot);
  memset(g->pms, 0, sizeof g->pms);
  g->ppasses = 0;
}

// Waits for the current pass's events and adds their intervals to the totals.
static void prof_collect(rd__gpu *g, int B, int L) {
  if (!g->prof || g->pn < 2) return;
  if (B != g->pB || L != g->pL) {
    prof_dump(g);
    g->pB = B;
    g->pL = L;
  }
  cudaEventSynchronize(g->pev[g->pn - 1]);
  for (int i = 1; i < g->pn; i++) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, g->pev[i - 1], g->pev[i]) == cudaSuccess) g->pms[g->pkind[i]] += ms;
  }
  g->ppasses++;
  g->pn = 0;
}

extern "C" int rd__gpu_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

static size_t weight_bytes(const rd__bert_config &c, size_t esz) {
  size_t H = c.hidden, I = c.inter;
  size_t b = dpool::round((size_t)c.vocab * H * 4) + dpool::round((size_t)c.max_pos * H * 4) +
             dpool::round((size_t)c.type_vocab * H * 4) + 2 * dpool::round(H * 4);
  size_t per = dpool::round(3 * H * H * esz) + dpool::round(H * H * esz) + 2 * dpool::round(I * H * esz) +
               dpool::round(3 * H * 4) + 7 * dpool::round(H * 4) + dpool::round(I * 4);
  return b + per * (size_t)c.layers + 4096;
}

static size_t act_bytes(const rd__gpu *g) {
  size_t H = g->c.hidden, I = g->c.inter, NH = g->c.heads, T = g->max_tokens, S = g->max_seq,
         B = g->max_batch, e = g->esz;
  size_t score_elems = T * NH * S;
  size_t attn = g->fused ? 0  // only the GEMM path needs v, ctx, scores and probs
                         : 2 * dpool::round(T * H * e) + dpool::round(score_elems * 4) +
                               dpool::round(score_elems * e);
  return dpool::round(T * 4) + dpool::round(B * 4) + dpool::round(T * H * 4) /* x32 */ +
         dpool::round(T * H * e) /* xh */ + dpool::round(T * 3 * H * e) /* qkv */ +
         2 * dpool::round(T * H * e) /* q k */ + dpool::round(T * I * e) /* ffn */ + attn +
         dpool::round(B * H * 4) + dpool::round(g->cublas_ws_size) + 4096;
}

extern "C" size_t rd__gpu_device_bytes(const rd__gpu *g) { return g ? g->wpool.size + g->apool.size : 0; }
extern "C" size_t rd__gpu_host_bytes(const rd__gpu *g) { return g ? g->host_bytes : 0; }
extern "C" int rd__gpu_attention(const rd__gpu *g) {
  return !g ? RD_ENGINE_ATTN_AUTO
            : g->flash ? RD_ENGINE_ATTN_FLASH
            : g->fused ? RD_ENGINE_ATTN_FUSED
                       : RD_ENGINE_ATTN_GEMM;
}

extern "C" void rd__gpu_close(rd__gpu *g) {
  if (!g) return;
  cudaSetDevice(g->device);
  if (g->stream) cudaStreamSynchronize(g->stream);
  for (int s = 0; s < 2; s++) {
    if (g->ids_h[s]) cudaFreeHost(g->ids_h[s]);
    if (g->lens_h[s]) cudaFreeHost(g->lens_h[s]);
    if (g->out_h[s]) cudaFreeHost(g->out_h[s]);
    if (g->done[s]) cudaEventDestroy(g->done[s]);
    free(g->dest[s]);
  }
  if (g->hid_h) cudaFreeHost(g->hid_h);
  if (g->hid_ev) cudaEventDestroy(g->hid_ev);
  prof_dump(g);
  for (int i = 0; i < RD__PROF_EVENTS; i++)
    if (g->pev[i]) cudaEventDestroy(g->pev[i]);
  if (g->blas) cublasDestroy(g->blas);
  if (g->lt_gelu) cublasLtMatmulDescDestroy(g->lt_gelu);
  if (g->lt) cublasLtDestroy(g->lt);
  if (g->wpool.base) cudaFree(g->wpool.base);
  if (g->apool.base) cudaFree(g->apool.base);
  if (g->stream) cudaStreamDestroy(g->stream);
  (void)cudaGetLastError();
  delete g;
}

// Uploads an fp32 host tensor as fp32.
static int up_f32(rd__gpu *g, rd__gpu_errctx *ctx, const float *src, size_t n, float **dst) {
  *dst = (float *)g->wpool.take(n * 4);
  if (!*dst) return RD_ENOMEM;
  RD_CUDA_CHECK(ctx, cudaMemcpyAsync(*dst, src, n * 4, cudaMemcpyHostToDevice, g->stream));
  return 0;
}

// Uploads an fp32 host matrix as T through a staging buffer (the activation pool).
template <typename T>
static int up_t(rd__gpu *g, rd__gpu_errctx *ctx, const float *src, size_t n, void **dst, float *stage) {
  *dst = g->wpool.take(n * sizeof(T));
  if (!*dst) return RD_ENOMEM;
  RD_CUDA_CHECK(ctx, cudaMemcpyAsync(stage, src, n * 4, cudaMemcpyHostToDevice, g->stream));
  rd__cuda_convert<T>(stage, (T *)*dst, n, g->stream);
  RD_CUDA_CHECK(ctx, cudaGetLastError());
  return 0;
}

template <typename T>
static int upload(rd__gpu *g, const rd__bert *m, rd__gpu_errctx *ctx) {
  const rd__bert_config &c = m->c;
  size_t H = c.hidden, I = c.inter;
  float *stage = (float *)g->apool.base;  // activations are not in use yet
  int rc;
  if ((rc = up_f32(g, ctx, m->word, (size_t)c.vocab * H, &g->word)) ||
      (rc = up_f32(g, ctx, m->pos, (size_t)c.max_pos * H, &g->pos)) ||
      (rc = up_f32(g, ctx, m->type, (size_t)c.type_vocab * H, &g->type)) ||
      (rc = up_f32(g, ctx, m->emb_ln_g, H, &g->emb_g)) ||
      (rc = up_f32(g, ctx, m->emb_ln_b, H, &g->emb_b)))
    return rc;
  for (int l = 0; l < c.layers; l++) {
    const rd__bert_layer &L = m->layer[l];
    dlayer &D = g->layer[l];
    if ((rc = up_t<T>(g, ctx, L.wqkv, 3 * H * H, &D.wqkv, stage)) ||
        (rc = up_t<T>(g, ctx, L.wo, H * H, &D.wo, stage)) ||
        (rc = up_t<T>(g, ctx, L.wi, I * H, &D.wi, stage)) ||
        (rc = up_t<T>(g, ctx, L.wo2, H * I, &D.wo2, stage)) ||
        (rc = up_f32(g, ctx, L.bqkv, 3 * H, &D.bqkv)) || (rc = up_f32(g, ctx, L.bo, H, &D.bo)) ||
        (rc = up_f32(g, ctx, L.ln1_g, H, &D.ln1_g)) || (rc = up_f32(g, ctx, L.ln1_b, H, &D.ln1_b)) ||
        (rc = up_f32(g, ctx, L.bi, I, &D.bi)) || (rc = up_f32(g, ctx, L.bo2, H, &D.bo2)) ||
        (rc = up_f32(g, ctx, L.ln2_g, H, &D.ln2_g)) || (rc = up_f32(g, ctx, L.ln2_b, H, &D.ln2_b)))
      return rc;
    // the staging buffer is reused by the next layer: keep the order explicit
    RD_CUDA_CHECK(ctx, cudaStreamSynchronize(g->stream));
  }
  return 0;
}

// RD_ENOTSUP with why an attention kernel asked for cannot run: smem is its
// shared memory per block for max_seq tokens, (size_t)-1 beyond its shapes.
static int attn_unfit(rd__gpu_errctx *ctx, const char *kind, const char *heads, const char *alt,
                      size_t smem, size_t max_seq, int dh, int device, int optin) {
  if (smem == (size_t)-1)
    snprintf(ctx->buf, ctx->len, "%s attention supports up to 512 tokens and %s (max_seq_len %zu, head size %d): "
             "use %s", kind, heads, max_seq, dh, alt);
  else
    snprintf(ctx->buf, ctx->len, "%s attention needs %zu bytes of shared memory per block for max_seq_len %zu "
             "(head size %d); device %d allows %d: use %s or a shorter max_seq_len",
             kind, smem, max_seq, dh, device, optin, alt);
  return RD_ENOTSUP;
}

static int open_inner(rd__gpu *g, const rd__bert *m, const rd__gpu_params *prm, rd__gpu_errctx *ctx) {
  int n = 0;
  cudaError_t ce = cudaGetDeviceCount(&n);
  if (ce != cudaSuccess || n == 0) {
    snprintf(ctx->buf, ctx->len, "no CUDA device available for device %d (%s)", prm->device,
             ce != cudaSuccess ? cudaGetErrorString(ce) : "cudaGetDeviceCount reports 0 devices");
    (void)cudaGetLastError();
    return RD_EGPU;
  }
  if (prm->device >= n) {
    snprintf(ctx->buf, ctx->len, "CUDA device %d does not exist (%d present)", prm->device, n);
    return RD_EGPU;
  }
  const rd__bert_config &c = m->c;
  if (c.hidden > RD__ROW_BLOCK * RD__ROW_MAX_PER_THREAD) {
    snprintf(ctx->buf, ctx->len, "hidden size %d exceeds the GPU kernels' limit %d", c.hidden,
             RD__ROW_BLOCK * RD__ROW_MAX_PER_THREAD);
    return RD_ENOTSUP;
  }
  g->device = prm->device;
  g->bf16 = prm->bf16;
  g->c = c;
  g->max_seq = (prm->max_seq + 7) & ~(size_t)7;
  g->max_tokens = prm->max_tokens < g->max_seq ? g->max_seq : prm->max_tokens;
  g->max_batch = prm->max_batch ? prm->max_batch : 1;
  {  // the elementwise kernels index a pass's activations with 32 bits
    const size_t T = g->max_tokens, widest = (size_t)(3 * c.hidden > c.inter ? 3 * c.hidden : c.inter);
    if (T * widest >= (1u << 31) || T * (size_t)c.heads * g->max_seq >= (1u << 31)) {
      snprintf(ctx->buf, ctx->len, "max_tokens_per_pass %zu too large for the GPU kernels (a pass's "
               "activations must stay under 2^31 elements)", T);
      return RD_EINVAL;
    }
  }
  // fused attention when its shared memory for the longest pass fits a
  // block; the register-resident (flash) kernel only when asked for (not yet
  // the default)
  int optin = 0;
  RD_CUDA_CHECK(ctx, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, prm->device));
  const size_t at_smem = rd__cuda_attention_smem((int)g->max_seq, c.head_dim),
               fa_smem = rd__cuda_flash_smem((int)g->max_seq, c.head_dim);
  const bool at_fits = at_smem <= (size_t)optin;
  if (prm->attention == RD_ENGINE_ATTN_FUSED && !at_fits)
    return attn_unfit(ctx, "fused", "heads a multiple of 16 up to 128 wide", "RD_ENGINE_ATTN_GEMM", at_smem,
                      g->max_seq, c.head_dim, prm->device, optin);
  if (prm->attention == RD_ENGINE_ATTN_FLASH && fa_smem > (size_t)optin)
    return attn_unfit(ctx, "flash", "heads 32 or 64 wide", "RD_ENGINE_ATTN_AUTO", fa_smem, g->max_seq,
                      c.head_dim, prm->device, optin);
  g->flash = prm->attention == RD_ENGINE_ATTN_FLASH;
  g->fused = g->flash || (prm->attention != RD_ENGINE_ATTN_GEMM && at_fits);
  size_t wb = weight_bytes(c, g->esz), ab = act_bytes(g);
  if (prm->mem_limit && wb + ab > prm->mem_limit) {
    snprintf(ctx->buf, ctx->len,
             "engine needs %zu bytes of device memory (weights %zu + workspace %zu), over the "
             "limit %zu%s: lower max_tokens_per_pass or max_seq_len",
             wb + ab, wb, ab, prm->mem_limit,
             prm->mem_limit_from_share ? " (this worker's GPU share, RAYDIST_GPU_MEMORY_BYTES)" : "");
    return RD_ENOMEM;
  }
  RD_CUDA_CHECK(ctx, cudaSetDevice(g->device));
  size_t free_b = 0, total_b = 0;
  RD_CUDA_CHECK(ctx, cudaMemGetInfo(&free_b, &total_b));
  if (wb + ab > free_b) {
    snprintf(ctx->buf, ctx->len, "engine needs %zu bytes of device memory, %zu free on device %d",
             wb + ab, free_b, g->device);
    return RD_ENOMEM;
  }
  if (g->flash)
    RD_CUDA_CHECK(ctx, g->bf16 ? rd__cuda_flash_prepare<__nv_bfloat16>(c.head_dim, fa_smem)
                               : rd__cuda_flash_prepare<__half>(c.head_dim, fa_smem));
  else if (g->fused)
    RD_CUDA_CHECK(ctx, g->bf16 ? rd__cuda_attention_prepare<__nv_bfloat16>(at_smem)
                               : rd__cuda_attention_prepare<__half>(at_smem));
  RD_CUDA_CHECK(ctx, cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
  RD_CUBLAS_CHECK(ctx, cublasCreate(&g->blas));
  RD_CUBLAS_CHECK(ctx, cublasSetStream(g->blas, g->stream));
  RD_CUDA_CHECK(ctx, cudaMalloc((void **)&g->wpool.base, wb));
  g->wpool.size = wb;
  RD_CUDA_CHECK(ctx, cudaMalloc((void **)&g->apool.base, ab));
  g->apool.size = ab;

  size_t H = c.hidden, I = c.inter, NH = c.heads, T = g->max_tokens, S = g->max_seq, B = g->max_batch,
         e = g->esz;
  dpool &a = g->apool;
  g->ids_d = (int32_t *)a.take(T * 4);
  g->lens_d = (int32_t *)a.take(B * 4);
  g->x32 = (float *)a.take(T * H * 4);
  g->xh = a.take(T * H * e);
  g->qkv = a.take(T * 3 * H * e);
  g->q = a.take(T * H * e);
  g->k = a.take(T * H * e);
  g->ffn = a.take(T * I * e);
  if (!g->fused) {
    g->v = a.take(T * H * e);
    g->ctx = a.take(T * H * e);
    g->scores = (float *)a.take(T * NH * S * 4);
    g->probs = a.take(T * NH * S * e);
  }
  g->out_d = (float *)a.take(B * H * 4);
  g->cublas_ws = a.take(g->cublas_ws_size);
  if (!g->cublas_ws) {
    snprintf(ctx->buf, ctx->len, "internal error: activation pool too small");
    return RD_ENOMEM;
  }
  RD_CUBLAS_CHECK(ctx, cublasSetWorkspace(g->blas, g->cublas_ws, g->cublas_ws_size));
  if (I * H * 4 > g->apool.size || 3 * H * H * 4 > g->apool.size) {  // weight staging
    snprintf(ctx->buf, ctx->len, "max_tokens_per_pass too small to stage the weights");
    return RD_EINVAL;
  }

  int rc = g->bf16 ? upload<__nv_bfloat16>(g, m, ctx) : upload<__half>(g, m, ctx);
  if (rc == RD_ENOMEM) snprintf(ctx->buf, ctx->len, "internal error: weight pool too small");
  if (rc) return rc;

  for (int s = 0; s < 2; s++) {
    RD_CUDA_CHECK(ctx, cudaHostAlloc((void **)&g->ids_h[s], T * 4, cudaHostAllocDefault));
    RD_CUDA_CHECK(ctx, cudaHostAlloc((void **)&g->lens_h[s], B * 4, cudaHostAllocDefault));
    RD_CUDA_CHECK(ctx, cudaHostAlloc((void **)&g->out_h[s], B * H * 4, cudaHostAllocDefault));
    RD_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&g->done[s], cudaEventDisableTiming));
    g->dest[s] = (float **)malloc(B * sizeof(float *));
    if (!g->dest[s]) return RD_ENOMEM;
  }
  RD_CUDA_CHECK(ctx, cudaEventCreateWithFlags(&g->hid_ev, cudaEventDisableTiming));
  const char *ge = getenv("RD_GPU_GELU_EPILOGUE");
  if (ge && *ge && strcmp(ge, "0")) {
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
    const cudaDataType_t bias_t = CUDA_R_32F;  // the fp32 bias the kernel path adds
    RD_CUBLAS_CHECK(ctx, cublasLtCreate(&g->lt));
    RD_CUBLAS_CHECK(ctx, cublasLtMatmulDescCreate(&g->lt_gelu, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    RD_CUBLAS_CHECK(ctx, cublasLtMatmulDescSetAttribute(g->lt_gelu, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    RD_CUBLAS_CHECK(ctx, cublasLtMatmulDescSetAttribute(g->lt_gelu, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    RD_CUBLAS_CHECK(ctx, cublasLtMatmulDescSetAttribute(g->lt_gelu, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    RD_CUBLAS_CHECK(ctx, cublasLtMatmulDescSetAttribute(g->lt_gelu, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_t,
                                                        sizeof bias_t));
    // refuse at open, not at the first pass, where cublasLt has no such GEMM
    const void *bias = g->layer[0].bi;
    lt_layouts lay;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulDescSetAttribute(g->lt_gelu, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (!st) st = lay.make(g->bf16 ? CUDA_R_16BF : CUDA_R_16F, T, I, H);
    if (!st) st = cublasLtMatmulPreferenceCreate(&pref);
    if (!st)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->cublas_ws_size,
                                                sizeof g->cublas_ws_size);
    if (!st) st = cublasLtMatmulAlgoGetHeuristic(g->lt, g->lt_gelu, lay.w, lay.x, lay.y, lay.y, pref, 1, &res, &found);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (st || !found) {
      snprintf(ctx->buf, ctx->len, "RD_GPU_GELU_EPILOGUE: cublasLt has no %s GEMM with a GELU + fp32 bias "
               "epilogue on device %d (%s)", g->bf16 ? "bf16" : "fp16", g->device,
               st ? cublasGetStatusString(st) : "no algorithm");
      return RD_ENOTSUP;
    }
  }
  const char *tr = getenv("RD_GPU_T_RESIDUAL");
  if (tr && *tr && strcmp(tr, "0")) {
    if (H % 4 || H > 4 * 32 * RD_LNT_CHUNKS) {
      snprintf(ctx->buf, ctx->len, "RD_GPU_T_RESIDUAL: hidden size %zu is not a multiple of 4 up to %d", H,
               4 * 32 * RD_LNT_CHUNKS);
      return RD_ENOTSUP;
    }
    g->t_resid = 1;
  }
  const char *pe = getenv("RD_GPU_PROFILE");
  if (pe && *pe && strcmp(pe, "0")) {
    for (int i = 0; i < RD__PROF_EVENTS; i++) RD_CUDA_CHECK(ctx, cudaEventCreate(&g->pev[i]));
    g->prof = 1;
  }
  g->host_bytes = 2 * (T * 4 + B * 4 + B * H * 4 + B * sizeof(float *));
  RD_CUDA_CHECK(ctx, cudaStreamSynchronize(g->stream));
  return 0;
}

extern "C" int rd__gpu_open(const rd__bert *m, const rd__gpu_params *prm, rd__gpu **out, char *err,
                            size_t errlen) {
  *out = nullptr;
  rd__gpu_errctx ctx{err, errlen};
  rd__gpu *g = new (std::nothrow) rd__gpu();
  if (!g) return RD_ENOMEM;
  int rc = open_inner(g, m, prm, &ctx);
  if (rc) {
    rd__gpu_close(g);
    return rc;
  }
  *out = g;
  return 0;
}

// Y[rows x n] = X[rows x k] W^T with W row-major [n x k] (column-major view:
// Y^T = W X^T).
static cublasStatus_t linear(rd__gpu *g, cudaDataType_t dt, const void *x, const void *w, void *y,
                             int rows, int n, int k) {
  const float one = 1.0f, zero = 0.0f;
  return cublasGemmEx(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &one, w, dt, k, x, dt, k, &zero,
                      y, dt, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

// y = GELU(x W^T + bias) in one cublasLt call (RD_GPU_GELU_EPILOGUE): the
// layouts of linear() (lt_layouts), the bias per row of D, cuBLAS's
// workspace (same stream, calls in order).
static cublasStatus_t linear_gelu(rd__gpu *g, cudaDataType_t dt, const void *x, const void *w,
                                  const float *bias, void *y, int rows, int n, int k) {
  const float one = 1.0f, zero = 0.0f;
  lt_layouts lay;
  cublasStatus_t st = cublasLtMatmulDescSetAttribute(g->lt_gelu, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                     sizeof bias);
  if (st == CUBLAS_STATUS_SUCCESS) st = lay.make(dt, rows, n, k);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmul(g->lt, g->lt_gelu, &one, w, lay.w, x, lay.x, &zero, y, lay.y, y, lay.y, nullptr,
                        g->cublas_ws, g->cublas_ws_size, g->stream);
  return st;
}

// bias + residual + LayerNorm on the stream the engine keeps: x32, or xh
// itself (RD_GPU_T_RESIDUAL)
template <typename T>
static void residual_ln(rd__gpu *g, T *xh, const T *t, const float *bias, const float *gam, const float *bet,
                        int rows) {
  const rd__bert_config &c = g->c;
  if (g->t_resid)
    rd__cuda_residual_ln_t<T>(xh, t, bias, gam, bet, c.ln_eps, rows, c.hidden, g->stream);
  else
    rd__cuda_residual_ln<T>(g->x32, xh, t, bias, gam, bet, c.ln_eps, rows, c.hidden, g->stream);
}

// The GEMM path of attention (RD_ENGINE_ATTN_GEMM): QKV rows + bias -> per-head
// Q (scaled), K, V; scores in fp32 by a strided-batched GEMM; masked softmax;
// P V by another; heads merged back into token rows at out.
template <typename T>
static int attention_gemm(rd__gpu *g, int B, int L, const T *qkv, const float *bqkv, T *out,
                          float qscale, rd__gpu_errctx *ctx) {
  const int NH = g->c.heads, DH = g->c.head_dim;
  const cudaDataType_t dt = rd__ty<T>::cuda;
  const float one = 1.0f, zero = 0.0f;
  cudaStream_t s = g->stream;
  T *q = (T *)g->q, *k = (T *)g->k, *v = (T *)g->v, *ctxh = (T *)g->ctx, *probs = (T *)g->probs;
  rd__cuda_qkv_split<T>(qkv, bqkv, q, k, v, B, L, NH, DH, qscale, s);
  prof_mark(g, P_SPLIT);
  // scores[b,h] (L x L, row-major) = Q K^T: column-major S^T = K Q^T
  RD_CUBLAS_CHECK(ctx, cublasGemmStridedBatchedEx(
                           g->blas, CUBLAS_OP_T, CUBLAS_OP_N, L, L, DH, &one, k, dt, DH,
                           (long long)L * DH, q, dt, DH, (long long)L * DH, &zero, g->scores,
                           CUDA_R_32F, L, (long long)L * L, B * NH, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT));
  prof_mark(g, P_SCORES);
  rd__cuda_softmax_mask<T>(g->scores, probs, g->lens_d, B, NH, L, s);
  prof_mark(g, P_SOFTMAX);
  // ctx[b,h] (L x DH) = P V: column-major ctx^T = V^T P^T
  RD_CUBLAS_CHECK(ctx, cublasGemmStridedBatchedEx(
                           g->blas, CUBLAS_OP_N, CUBLAS_OP_N, DH, L, L, &one, v, dt, DH,
                           (long long)L * DH, probs, dt, L, (long long)L * L, &zero, ctxh, dt, DH,
                           (long long)L * DH, B * NH, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  prof_mark(g, P_PV);
  rd__cuda_merge_heads<T>(ctxh, out, B, L, NH, DH, s);  // out may be q: free again
  prof_mark(g, P_MERGE);
  return 0;
}

// Stage st of one pass of B sequences padded to L rows, queued on the stream:
// the embedding layer (or, for hidden rows already uploaded into x32, their
// rounded GEMM copy), encoder layers [first, last), then pooling if asked.
// The residual stream x32 is the whole state between layers, so a stage that
// starts from uploaded rows continues exactly where another stopped.
template <typename T>
static int forward(rd__gpu *g, int B, int L, const rd__stage *st, rd__gpu_errctx *ctx) {
  const rd__bert_config &c = g->c;
  const int H = c.hidden, I = c.inter, NH = c.heads, DH = c.head_dim, R = B * L;
  const cudaDataType_t dt = rd__ty<T>::cuda;
  const float qscale = 1.0f / sqrtf((float)DH);
  cudaStream_t s = g->stream;
  T *xh = (T *)g->xh, *qkv = (T *)g->qkv, *q = (T *)g->q, *k = (T *)g->k, *ffn = (T *)g->ffn;
  g->pn = 0;
  prof_mark(g, -1);
  if (st->in_rows)
    rd__cuda_convert<T>(g->x32, xh, (size_t)R * H, s);
  else
    rd__cuda_embed_ln<T>(g->ids_d, R, L, g->word, g->pos, g->type, g->emb_g, g->emb_b, c.ln_eps, H,
                         g->x32, xh, s);
  prof_mark(g, P_EMBED);
  for (int l = st->first; l < st->last; l++) {
    const dlayer &D = g->layer[l];
    RD_CUBLAS_CHECK(ctx, linear(g, dt, xh, D.wqkv, qkv, R, 3 * H, H));
    prof_mark(g, P_QKV);
    if (g->flash) {  // attention output rows into q
      rd__cuda_flash<T>(qkv, D.bqkv, g->lens_d, q, B, L, NH, DH, qscale, s);
      prof_mark(g, P_ATTN);
    } else if (g->fused) {
      rd__cuda_attention<T>(qkv, D.bqkv, g->lens_d, q, B, L, NH, DH, qscale, s);
      prof_mark(g, P_ATTN);
    } else {
      int rc = attention_gemm<T>(g, B, L, qkv, D.bqkv, q, qscale, ctx);
      if (rc) return rc;
    }
    RD_CUBLAS_CHECK(ctx, linear(g, dt, q, D.wo, k, R, H, H));
    prof_mark(g, P_OPROJ);
    residual_ln<T>(g, xh, k, D.bo, D.ln1_g, D.ln1_b, R);
    prof_mark(g, P_LN1);
    if (g->lt_gelu) {
      RD_CUBLAS_CHECK(ctx, linear_gelu(g, dt, xh, D.wi, D.bi, ffn, R, I, H));
      prof_mark(g, P_FFN1);
    } else {
      RD_CUBLAS_CHECK(ctx, linear(g, dt, xh, D.wi, ffn, R, I, H));
      prof_mark(g, P_FFN1);
      rd__cuda_bias_gelu<T>(ffn, D.bi, R, I, s);
      prof_mark(g, P_GELU);
    }
    RD_CUBLAS_CHECK(ctx, linear(g, dt, ffn, D.wo2, qkv, R, H, I));
    prof_mark(g, P_FFN2);
    residual_ln<T>(g, xh, qkv, D.bo2, D.ln2_g, D.ln2_b, R);
    prof_mark(g, P_LN2);
    RD_CUDA_CHECK(ctx, cudaGetLastError());
  }
  // a T residual stream is widened where the stage ends: pooled from, or
  // copied out as the fp32 state (whose rounding back to T is exact, so a
  // split pass still equals the unsplit one)
  if (g->t_resid && st->last > st->first) rd__cuda_widen<T>(xh, g->x32, (size_t)R * H, s);
  if (st->pool) rd__cuda_mean_pool_l2(g->x32, g->lens_d, B, L, H, g->out_d, s);
  prof_mark(g, P_POOL);
  RD_CUDA_CHECK(ctx, cudaGetLastError());
  prof_collect(g, B, L);
  return 0;
}

// Waits for the pass in slot s and copies its embeddings to their rows.
static int drain(rd__gpu *g, int s, rd__gpu_errctx *ctx) {
  if (!g->pending[s]) return 0;
  size_t n = g->pending[s], H = g->c.hidden;
  g->pending[s] = 0;
  RD_CUDA_CHECK(ctx, cudaEventSynchronize(g->done[s]));
  for (size_t b = 0; b < n; b++) memcpy(g->dest[s][b], g->out_h[s] + b * H, H * sizeof(float));
  return 0;
}

extern "C" int rd__gpu_submit(rd__gpu *g, const rd__pass *p, const rd__stage *st, char *err,
                              size_t errlen) {
  rd__gpu_errctx ctx{err, errlen};
  const size_t B = p->nseq, L = p->max_len, H = g->c.hidden;
  if (!B) return 0;
  if (B > g->max_batch || L > g->max_seq || B * L > g->max_tokens) {
    snprintf(err, errlen, "pass of %zu x %zu tokens exceeds the workspace (%zu tokens, %zu sequences)",
             B, L, g->max_tokens, g->max_batch);
    return RD_EINVAL;
  }
  if (st->first < 0 || st->first > st->last || st->last > g->c.layers) {
    snprintf(err, errlen, "layers [%d, %d) outside the model's %d", st->first, st->last, g->c.layers);
    return RD_EINVAL;
  }
  RD_CUDA_CHECK(&ctx, cudaSetDevice(g->device));
  if ((st->in_rows || !st->pool) && !g->hid_h) {
    RD_CUDA_CHECK(&ctx, cudaHostAlloc((void **)&g->hid_h, g->max_tokens * H * 4, cudaHostAllocDefault));
    g->host_bytes += g->max_tokens * H * 4;
  }
  const int s = g->slot;
  g->slot ^= 1;
  int rc = drain(g, s, &ctx);
  if (rc) return rc;
  int32_t *ids = g->ids_h[s], *lens = g->lens_h[s];
  for (size_t b = 0; b < B; b++) lens[b] = (int32_t)p->len[b];
  if (!st->in_rows) {
    for (size_t b = 0; b < B; b++) {
      memcpy(ids + b * L, p->ids[b], p->len[b] * sizeof(int32_t));
      memset(ids + b * L + p->len[b], 0, (L - p->len[b]) * sizeof(int32_t));  // [PAD], masked
    }
    RD_CUDA_CHECK(&ctx, cudaMemcpyAsync(g->ids_d, ids, B * L * 4, cudaMemcpyHostToDevice, g->stream));
  }
  RD_CUDA_CHECK(&ctx, cudaMemcpyAsync(g->lens_d, lens, B * 4, cudaMemcpyHostToDevice, g->stream));
  if (st->in_rows) {
    // the last copy that used the staging buffer must be over before refilling it
    if (g->hid_used) RD_CUDA_CHECK(&ctx, cudaEventSynchronize(g->hid_ev));
    for (size_t b = 0; b < B; b++) {
      memcpy(g->hid_h + b * L * H, st->in_rows[b], p->len[b] * H * sizeof(float));
      memset(g->hid_h + (b * L + p->len[b]) * H, 0, (L - p->len[b]) * H * sizeof(float));  // masked
    }
    RD_CUDA_CHECK(&ctx, cudaMemcpyAsync(g->x32, g->hid_h, B * L * H * 4, cudaMemcpyHostToDevice, g->stream));
    RD_CUDA_CHECK(&ctx, cudaEventRecord(g->hid_ev, g->stream));
    g->hid_used = 1;
  }
  rc = g->bf16 ? forward<__nv_bfloat16>(g, (int)B, (int)L, st, &ctx)
               : forward<__half>(g, (int)B, (int)L, st, &ctx);
  if (rc) return rc;
  if (!st->pool) {  // hidden rows out: one staging buffer, so wait for them here
    RD_CUDA_CHECK(&ctx, cudaMemcpyAsync(g->hid_h, g->x32, B * L * H * 4, cudaMemcpyDeviceToHost, g->stream));
    RD_CUDA_CHECK(&ctx, cudaEventRecord(g->hid_ev, g->stream));
    g->hid_used = 1;
    RD_CUDA_CHECK(&ctx, cudaEventSynchronize(g->hid_ev));
    for (size_t b = 0; b < B; b++)
      memcpy(st->out_rows[b], g->hid_h + b * L * H, p->len[b] * H * sizeof(float));
    return 0;
  }
  RD_CUDA_CHECK(&ctx, cudaMemcpyAsync(g->out_h[s], g->out_d, B * H * sizeof(float),
                                      cudaMemcpyDeviceToHost, g->stream));
  RD_CUDA_CHECK(&ctx, cudaEventRecord(g->done[s], g->stream));
  memcpy(g->dest[s], st->out_rows, B * sizeof(float *));
  g->pending[s] = B;
  return 0;
}

extern "C" int rd__gpu_finish(rd__gpu *g, char *err, size_t errlen) {
  rd__gpu_errctx ctx{err, errlen};
  RD_CUDA_CHECK(&ctx, cudaSetDevice(g->device));
  int rc = drain(g, g->slot, &ctx);  // the older pass first
  if (!rc) rc = drain(g, g->slot ^ 1, &ctx);
  return rc;
}
