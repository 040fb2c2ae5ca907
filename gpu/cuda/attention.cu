// attention.cu - fused multi-head self-attention: one block per (sequence,
// head, 64 query rows) reads its Q, K and V straight from the fused QKV
// projection (adding the bias, scaling Q), and keeps everything else in
// shared memory: S = Q K^T and O = P V on the tensor cores (WMMA, fp32
// accumulation), the masked softmax in fp32 between them.  O is written in
// token-row layout, ready for the output projection.  It replaces the GEMM
// path's QKV split, two strided-batched GEMMs, softmax and head merge, and
// the (B, heads, L, L) score and probability tensors they move through device
// memory.  Numerics match that path: Q, K, V and P are rounded to T once.
//
// Each of the 4 warps owns 16 query rows.  Loads and stores move 16 bytes per
// thread.  Shared memory grows with the padded sequence length Lp
// (rd__cuda_attention_smem); P and then O reuse S's rows.  Sequences over 512
// tokens, heads not a multiple of 16 wide or over 128, or tiles over the
// device's per-block limit use the GEMM path instead.
#include <mma.h>

#include "ops.cuh"

#define RD__AT_ROWS 64                     // query rows per block
#define RD__AT_THREADS (RD__AT_ROWS / 16 * RD__WARP)
#define RD__AT_PAD 8                       // T elements of padding per K/V/Q row (16 bytes)
#define RD__AT_MAX_KEYS 512                // softmax keeps a row in registers: 16 per lane
#define RD__AT_MAX_DH 128                  // O accumulators per warp: dh / 16 fragments

namespace {

// Strides and region sizes of the block's shared memory, in elements: K, V
// (Lp rows) and Q (64 rows) as T with row stride ldk; then 64 rows of lds
// floats that hold S, then P (as T, in place, row stride 2 * lds), then O.
// Every region and every 16-row fragment start is 32-byte aligned, as WMMA's
// loads and stores require (ld a multiple of 8 for T and of 4 for float).
struct at_layout {
  int Lp, ldk, lds;
  __host__ __device__ at_layout(int L, int dh)
      : Lp((L + 15) & ~15), ldk(dh + RD__AT_PAD), lds((Lp > dh ? Lp : dh) + 4) {}
  __host__ __device__ size_t bytes() const {
    return (size_t)(2 * Lp + RD__AT_ROWS) * ldk * 2 + (size_t)RD__AT_ROWS * lds * 4;
  }
};

// 8 consecutive elements (16 bytes) plus their bias, times scale.
template <typename T>
__device__ __forceinline__ uint4 bias8(uint4 raw, const float *__restrict__ bias, float scale) {
  __align__(16) T t[8];
  *reinterpret_cast<uint4 *>(t) = raw;
  const float4 b0 = *reinterpret_cast<const float4 *>(bias),
               b1 = *reinterpret_cast<const float4 *>(bias + 4);
  const float bb[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
  for (int q = 0; q < 8; q++) t[q] = rd__ty<T>::from((rd__ty<T>::to(t[q]) + bb[q]) * scale);
  return *reinterpret_cast<uint4 *>(t);
}

}  // namespace

template <typename T>
__global__ void __launch_bounds__(RD__AT_THREADS)
    rd__attention_kernel(const T *__restrict__ qkv, const float *__restrict__ bias,
                         const int32_t *__restrict__ lens, T *__restrict__ out, int L, int heads,
                         int dh, float qscale) {
  using namespace nvcuda;
  extern __shared__ __align__(128) unsigned char rd__at_sm[];
  const at_layout ly(L, dh);
  T *Ks = (T *)rd__at_sm, *Vs = Ks + (size_t)ly.Lp * ly.ldk, *Qs = Vs + (size_t)ly.Lp * ly.ldk;
  float *Ss = (float *)(Qs + (size_t)RD__AT_ROWS * ly.ldk);
  const int ldp = 2 * ly.lds;  // P over S, as T

  const int i0 = blockIdx.x * RD__AT_ROWS, h = blockIdx.y, b = blockIdx.z;
  const int H = heads * dh, H3 = 3 * H, len = lens[b], dv = dh / 8;
  const T *seq = qkv + (size_t)b * L * H3 + (size_t)h * dh;
  const float *bq = bias + h * dh, *bk = bq + H, *bv = bq + 2 * H;
  const uint4 zero = make_uint4(0, 0, 0, 0);

  // K and V rows j < Lp (zero past L), then this block's Q rows (zero past
  // L), 16 bytes at a time
#pragma unroll 4
  for (int e = threadIdx.x; e < ly.Lp * dv; e += RD__AT_THREADS) {
    const int j = e / dv, d = (e - j * dv) * 8;
    uint4 kr = zero, vr = zero;
    if (j < L) {
      const T *row = seq + (size_t)j * H3 + d;
      kr = bias8<T>(*reinterpret_cast<const uint4 *>(row + H), bk + d, 1.0f);
      vr = bias8<T>(*reinterpret_cast<const uint4 *>(row + 2 * H), bv + d, 1.0f);
    }
    *reinterpret_cast<uint4 *>(Ks + j * ly.ldk + d) = kr;
    *reinterpret_cast<uint4 *>(Vs + j * ly.ldk + d) = vr;
  }
#pragma unroll 2
  for (int e = threadIdx.x; e < RD__AT_ROWS * dv; e += RD__AT_THREADS) {
    const int r = e / dv, d = (e - r * dv) * 8, i = i0 + r;
    uint4 qr = zero;
    if (i < L) qr = bias8<T>(*reinterpret_cast<const uint4 *>(seq + (size_t)i * H3 + d), bq + d, qscale);
    *reinterpret_cast<uint4 *>(Qs + r * ly.ldk + d) = qr;
  }
  __syncthreads();

  const int w = threadIdx.x / RD__WARP, lane = threadIdx.x % RD__WARP, r0 = w * 16;
  if (i0 + r0 >= L) return;  // warp-uniform: all 16 rows are past the sequence

  // S (16 x Lp) = Q K^T: K^T is K read column-major
  for (int n = 0; n < ly.Lp; n += 16) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < dh; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, Qs + r0 * ly.ldk + k, ly.ldk);
      wmma::load_matrix_sync(fb, Ks + n * ly.ldk + k, ly.ldk);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(Ss + r0 * ly.lds + n, acc, ly.lds, wmma::mem_row_major);
  }
  __syncwarp();

  // masked softmax per row, the row in registers; P (keys j >= len: 0)
  // overwrites S in place once the whole warp holds its row
  for (int r = r0; r < r0 + 16; r++) {
    float *srow = Ss + r * ly.lds;
    float v[RD__AT_MAX_KEYS / RD__WARP];
    float mx = -INFINITY;
#pragma unroll
    for (int t = 0; t < RD__AT_MAX_KEYS / RD__WARP; t++) {
      const int j = lane + t * RD__WARP;
      v[t] = j < len ? srow[j] : -INFINITY;
      mx = fmaxf(mx, v[t]);
    }
    mx = rd__warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int t = 0; t < RD__AT_MAX_KEYS / RD__WARP; t++) {
      v[t] = lane + t * RD__WARP < len ? __expf(v[t] - mx) : 0.0f;
      sum += v[t];
    }
    const float inv = 1.0f / rd__warp_sum(sum);  // also orders the row's reads before the writes
    __syncwarp();
    T *prow = (T *)srow;
#pragma unroll
    for (int t = 0; t < RD__AT_MAX_KEYS / RD__WARP; t++) {
      const int j = lane + t * RD__WARP;
      if (j < ly.Lp) prow[j] = rd__ty<T>::from(v[t] * inv);
    }
  }
  __syncwarp();

  // O (16 x dh) = P V, every column block accumulated before O overwrites P
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[RD__AT_MAX_DH / 16];
#pragma unroll
  for (int n = 0; n < RD__AT_MAX_DH / 16; n++)
    if (n * 16 < dh) wmma::fill_fragment(acc[n], 0.0f);
  const T *Ps = (const T *)Ss;
  for (int k = 0; k < ly.Lp; k += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, Ps + r0 * ldp + k, ldp);
#pragma unroll
    for (int n = 0; n < RD__AT_MAX_DH / 16; n++) {
      if (n * 16 >= dh) break;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
      wmma::load_matrix_sync(fb, Vs + k * ly.ldk + n * 16, ly.ldk);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
  __syncwarp();
#pragma unroll
  for (int n = 0; n < RD__AT_MAX_DH / 16; n++)
    if (n * 16 < dh) wmma::store_matrix_sync(Ss + r0 * ly.lds + n * 16, acc[n], ly.lds, wmma::mem_row_major);
  __syncwarp();

  T *dst = out + (size_t)b * L * H + (size_t)h * dh;
  for (int e = lane; e < 16 * dv; e += RD__WARP) {
    const int r = e / dv, d = (e - r * dv) * 8, i = i0 + r0 + r;
    if (i >= L) continue;
    const float *o = Ss + (r0 + r) * ly.lds + d;
    __align__(16) T t[8];
#pragma unroll
    for (int q = 0; q < 8; q++) t[q] = rd__ty<T>::from(o[q]);
    *reinterpret_cast<uint4 *>(dst + (size_t)i * H + d) = *reinterpret_cast<uint4 *>(t);
  }
}

size_t rd__cuda_attention_smem(int L, int dh) {
  if (dh % 16 || dh > RD__AT_MAX_DH || L > RD__AT_MAX_KEYS) return (size_t)-1;  // not supported
  return at_layout(L, dh).bytes();
}

template <typename T>
cudaError_t rd__cuda_attention_prepare(size_t smem) {
  return cudaFuncSetAttribute(rd__attention_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)smem);
}

template <typename T>
void rd__cuda_attention(const T *qkv, const float *bias, const int32_t *lens, T *out, int B, int L,
                        int heads, int dh, float qscale, cudaStream_t s) {
  if (!B || !L) return;
  dim3 grid((unsigned)((L + RD__AT_ROWS - 1) / RD__AT_ROWS), (unsigned)heads, (unsigned)B);
  rd__attention_kernel<T><<<grid, RD__AT_THREADS, rd__cuda_attention_smem(L, dh), s>>>(
      qkv, bias, lens, out, L, heads, dh, qscale);
}

template cudaError_t rd__cuda_attention_prepare<__half>(size_t);
template cudaError_t rd__cuda_attention_prepare<__nv_bfloat16>(size_t);
template void rd__cuda_attention<__half>(const __half *, const float *, const int32_t *, __half *,
                                         int, int, int, int, float, cudaStream_t);
template void rd__cuda_attention<__nv_bfloat16>(const __nv_bfloat16 *, const float *,
                                                const int32_t *, __nv_bfloat16 *, int, int, int,
                                                int, float, cudaStream_t);
