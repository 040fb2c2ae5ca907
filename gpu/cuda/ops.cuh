// ops.cuh - launchers of the engine's CUDA kernels, one .cu file per op kind.
// Each enqueues on the given stream and returns; the dispatcher (bert.cu)
// checks cudaGetLastError.  T is __half or __nv_bfloat16.
#pragma once

#include "common.cuh"

// getrows.cu: x = LayerNorm(word[id] + pos[i] + type[0]) for each of rows tokens
// (padded layout: row r is token r % L of sequence r / L); writes fp32 and T.
template <typename T>
void rd__cuda_embed_ln(const int32_t *ids, int rows, int L, const float *word, const float *pos,
                       const float *type, const float *g, const float *b, float eps, int H,
                       float *x32, T *xh, cudaStream_t s);

// norm.cu: x32 = LayerNorm(x32 + t + bias); xh = (T)x32.
template <typename T>
void rd__cuda_residual_ln(float *x32, T *xh, const T *t, const float *bias, const float *g,
                          const float *b, float eps, int rows, int H, cudaStream_t s);

// norm.cu, the residual stream in T (RD_GPU_T_RESIDUAL): xh = (T)LayerNorm(xh +
// t + bias); H a multiple of 4, at most 1024 (norm_t.cuh).
template <typename T>
void rd__cuda_residual_ln_t(T *xh, const T *t, const float *bias, const float *g, const float *b, float eps,
                            int rows, int H, cudaStream_t s);

// unary.cu: y = gelu_erf(y + bias), y is rows x n.
template <typename T>
void rd__cuda_bias_gelu(T *y, const float *bias, int rows, int n, cudaStream_t s);

// permute.cu: fused-QKV rows [B*L x 3H] + bias -> Q (scaled), K, V as
// [B, heads, L, dh]; and attention output [B, heads, L, dh] -> rows [B*L x H].
template <typename T>
void rd__cuda_qkv_split(const T *qkv, const float *bias, T *q, T *k, T *v, int B, int L, int heads,
                        int dh, float qscale, cudaStream_t s);
template <typename T>
void rd__cuda_merge_heads(const T *ctx, T *out, int B, int L, int heads, int dh, cudaStream_t s);

// softmax.cu: row-wise softmax of fp32 scores [B*heads*L x L] with key j masked
// out where j >= lens[b]; writes probabilities as T.
template <typename T>
void rd__cuda_softmax_mask(const float *scores, T *probs, const int32_t *lens, int B, int heads,
                           int L, cudaStream_t s);

// pool.cu: out[b] = normalize(mean over i < lens[b] of x32[b*L + i]).
void rd__cuda_mean_pool_l2(const float *x32, const int32_t *lens, int B, int L, int H, float *out,
                           cudaStream_t s);

// T -> fp32 of n values (the T residual stream before pooling or output rows).
template <typename T>
void rd__cuda_widen(const T *src, float *dst, size_t n, cudaStream_t s);

// fp32 -> T conversion of n values (weights upload).
template <typename T>
void rd__cuda_convert(const float *src, T *dst, size_t n, cudaStream_t s);

// attention.cu: fused attention from the QKV projection rows [B*L x 3H] (+
// bias, Q scaled) to output rows [B*L x H], keys j >= lens[b] masked; one
// block per (sequence, head, 64 query rows), rd__cuda_attention_smem(L, dh)
// bytes of shared memory, (size_t)-1 where L or dh is beyond the kernel (L <=
// 512; dh a multiple of 16, <= 128).  _prepare raises the kernel's
// dynamic shared-memory limit to smem (needed above 48 KB), once per device.
size_t rd__cuda_attention_smem(int L, int dh);
template <typename T>
cudaError_t rd__cuda_attention_prepare(size_t smem);
template <typename T>
void rd__cuda_attention(const T *qkv, const float *bias, const int32_t *lens, T *out, int B, int L,
                        int heads, int dh, float qscale, cudaStream_t s);

// flash.cu: the same contract as rd__cuda_attention, with S and P in
// registers (mma.sync, online softmax; flash.cuh).  Heads 32 or 64 wide, L <=
// 512; rd__cuda_flash_smem is (size_t)-1 otherwise.  _prepare raises the
// kernel's dynamic shared-memory limit (needed above 48 KB).
size_t rd__cuda_flash_smem(int L, int dh);
template <typename T>
cudaError_t rd__cuda_flash_prepare(int dh, size_t smem);
template <typename T>
void rd__cuda_flash(const T *qkv, const float *bias, const int32_t *lens, T *out, int B, int L,
                    int heads, int dh, float qscale, cudaStream_t s);
