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
// Each of the 4 warps owns 16 query rows.  Shared memory grows with the
// padded sequence length Lp (rd__cuda_attention_smem); sequences too long for
// the device's per-block limit use the GEMM path instead.
#include <mma.h>

#include "ops.cuh"

#define RD__AT_ROWS 64                     // query rows per block
#define RD__AT_THREADS (RD__AT_ROWS / 16 * RD__WARP)
#define RD__AT_PAD 8                       // T elements of padding per row (16 bytes)

namespace {

// Strides and region sizes of the block's shared memory, in elements.  Every
// region and every 16-row fragment start is 32-byte aligned, as WMMA's loads
// and stores require: ld multiples of 8 for T and of 4 for float.
struct at_layout {
  int Lp, ldk, lds, ldp, ldo;
  __host__ __device__ at_layout(int L, int dh)
      : Lp((L + 15) & ~15), ldk(dh + RD__AT_PAD), lds(Lp + 4), ldp(Lp + RD__AT_PAD), ldo(dh + 4) {}
  __host__ __device__ size_t bytes() const {
    return (size_t)(2 * Lp + RD__AT_ROWS) * ldk * 2 + (size_t)RD__AT_ROWS * lds * 4 +
           (size_t)RD__AT_ROWS * ldp * 2 + (size_t)RD__AT_ROWS * ldo * 4;
  }
};

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
  T *Ps = (T *)(Ss + (size_t)RD__AT_ROWS * ly.lds);
  float *Os = (float *)(Ps + (size_t)RD__AT_ROWS * ly.ldp);

  const int i0 = blockIdx.x * RD__AT_ROWS, h = blockIdx.y, b = blockIdx.z;
  const int H = heads * dh, H3 = 3 * H, len = lens[b];
  const T *seq = qkv + (size_t)b * L * H3 + (size_t)h * dh;
  const float *bq = bias + h * dh, *bk = bq + H, *bv = bq + 2 * H;

  // K and V rows j < Lp (zero past L), then this block's Q rows (zero past L)
  for (int e = threadIdx.x; e < ly.Lp * dh; e += blockDim.x) {
    const int j = e / dh, d = e % dh;
    float kv = 0.0f, vv = 0.0f;
    if (j < L) {
      const T *row = seq + (size_t)j * H3;
      kv = rd__ty<T>::to(row[H + d]) + bk[d];
      vv = rd__ty<T>::to(row[2 * H + d]) + bv[d];
    }
    Ks[j * ly.ldk + d] = rd__ty<T>::from(kv);
    Vs[j * ly.ldk + d] = rd__ty<T>::from(vv);
  }
  for (int e = threadIdx.x; e < RD__AT_ROWS * dh; e += blockDim.x) {
    const int r = e / dh, d = e % dh, i = i0 + r;
    const float qv = i < L ? (rd__ty<T>::to(seq[(size_t)i * H3 + d]) + bq[d]) * qscale : 0.0f;
    Qs[r * ly.ldk + d] = rd__ty<T>::from(qv);
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

  // masked softmax per row: keys j >= len get probability 0 (len >= 1)
  for (int r = r0; r < r0 + 16; r++) {
    float *srow = Ss + r * ly.lds;
    T *prow = Ps + r * ly.ldp;
    float mx = -INFINITY;
    for (int j = lane; j < len; j += RD__WARP) mx = fmaxf(mx, srow[j]);
    mx = rd__warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j < len; j += RD__WARP) sum += __expf(srow[j] - mx);
    const float inv = 1.0f / rd__warp_sum(sum);
    for (int j = lane; j < ly.Lp; j += RD__WARP)
      prow[j] = rd__ty<T>::from(j < len ? __expf(srow[j] - mx) * inv : 0.0f);
  }
  __syncwarp();

  // O (16 x dh) = P V
  for (int n = 0; n < dh; n += 16) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < ly.Lp; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, Ps + r0 * ly.ldp + k, ly.ldp);
      wmma::load_matrix_sync(fb, Vs + k * ly.ldk + n, ly.ldk);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(Os + r0 * ly.ldo + n, acc, ly.ldo, wmma::mem_row_major);
  }
  __syncwarp();

  T *dst = out + (size_t)b * L * H + (size_t)h * dh;
  for (int e = lane; e < 16 * dh; e += RD__WARP) {
    const int r = e / dh, d = e % dh, i = i0 + r0 + r;
    if (i < L) dst[(size_t)i * H + d] = rd__ty<T>::from(Os[(r0 + r) * ly.ldo + d]);
  }
}

size_t rd__cuda_attention_smem(int L, int dh) { return at_layout(L, dh).bytes(); }

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
