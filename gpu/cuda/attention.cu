// attention.cu - fused multi-head self-attention: one block per (sequence,
// head, 64 or 128 query rows) reads its Q, K and V straight from the fused QKV
// projection (adding the bias, scaling Q), and keeps everything else in
// shared memory: S = Q K^T and O = P V on the tensor cores (WMMA, fp32
// accumulation), the masked softmax in fp32 between them.  O is written in
// token-row layout, ready for the output projection.  It replaces the GEMM
// path's QKV split, two strided-batched GEMMs, softmax and head merge, and
// the (B, heads, L, L) score and probability tensors they move through device
// memory.  Numerics match that path: Q, K, V and P are rounded to T once.
//
// Each warp owns 16 query rows; a block has 4 or 8 warps.  Loads and stores move 16 bytes per
// thread.  Shared memory grows with the padded sequence length Lp
// (rd__cuda_attention_smem); P and then O reuse S's rows.  Sequences over 512
// tokens, heads not a multiple of 16 wide or over 128, or tiles over the
// device's per-block limit use the GEMM path instead.
#include <mma.h>

#include "ops.cuh"

#define RD__AT_PAD 8                       // T elements of padding per K/V/Q row (16 bytes)
#define RD__AT_MAX_KEYS 512                // softmax keeps a row in registers: 16 per lane
#define RD__AT_MAX_DH 128                  // O accumulators per warp: dh / 16 fragments

namespace {

// Query rows per block: 128 (8 warps, K and V loaded once per sequence and
// head) for padded lengths 80..256, else 64 (4 warps: short sequences leave
// fewer warps idle; long ones keep S within the shared memory of a block).
static __host__ __device__ constexpr int at_rows(int Lp) { return Lp > 64 && Lp <= 256 ? 128 : 64; }

// Strides and region sizes of the block's shared memory, in elements: K, V
// (Lp rows) and Q (rows) as T with row stride ldk; then rows x lds floats
// that hold S, then P (as T, in place, row stride 2 * lds), then O.
// Every region and every 16-row fragment start is 32-byte aligned, as WMMA's
// loads and stores require (ld a multiple of 8 for T and of 4 for float).
struct at_layout {
  int Lp, rows, ldk, lds;
  __host__ __device__ at_layout(int L, int dh)
      : Lp((L + 15) & ~15), rows(at_rows(Lp)), ldk(dh + RD__AT_PAD), lds((Lp > dh ? Lp : dh) + 4) {}
  __host__ __device__ size_t bytes() const {
    return (size_t)(2 * Lp + rows) * ldk * 2 + (size_t)rows * lds * 4;
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

// Max and sum over the warp of RI values at once: RI independent shuffle
// chains interleaved, so one row's latency hides another's.
template <int RI>
__device__ __forceinline__ void warp_max_n(float (&v)[RI]) {
#pragma unroll
  for (int o = RD__WARP / 2; o > 0; o >>= 1)
#pragma unroll
    for (int a = 0; a < RI; a++) v[a] = fmaxf(v[a], __shfl_xor_sync(0xffffffffu, v[a], o));
}
template <int RI>
__device__ __forceinline__ void warp_sum_n(float (&v)[RI]) {
#pragma unroll
  for (int o = RD__WARP / 2; o > 0; o >>= 1)
#pragma unroll
    for (int a = 0; a < RI; a++) v[a] += __shfl_xor_sync(0xffffffffu, v[a], o);
}

// KPL: keys per lane in the softmax (Lp <= 32 * KPL); rows are done RI at a
// time, as many as 16 registers of keys allow.  ROWS == at_rows(Lp).
template <typename T, int KPL, int ROWS>
__global__ void __launch_bounds__(ROWS * 2)
    rd__attention_kernel(const T *__restrict__ qkv, const float *__restrict__ bias,
                         const int32_t *__restrict__ lens, T *__restrict__ out, int L, int heads,
                         int dh, float qscale) {
  using namespace nvcuda;
  extern __shared__ __align__(128) unsigned char rd__at_sm[];
  const at_layout ly(L, dh);
  T *Ks = (T *)rd__at_sm, *Vs = Ks + (size_t)ly.Lp * ly.ldk, *Qs = Vs + (size_t)ly.Lp * ly.ldk;
  float *Ss = (float *)(Qs + (size_t)ROWS * ly.ldk);
  const int ldp = 2 * ly.lds;  // P over S, as T

  const int i0 = blockIdx.x * ROWS, h = blockIdx.y, b = blockIdx.z;
  const int H = heads * dh, H3 = 3 * H, len = lens[b], dv = dh / 8;
  const T *seq = qkv + (size_t)b * L * H3 + (size_t)h * dh;
  const float *bq = bias + h * dh, *bk = bq + H, *bv = bq + 2 * H;
  const uint4 zero = make_uint4(0, 0, 0, 0);

  // K and V rows j < Lp (zero past L), then this block's Q rows (zero past
  // L), 16 bytes at a time
#pragma unroll 4
  for (int e = threadIdx.x; e < ly.Lp * dv; e += ROWS * 2) {
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
  for (int e = threadIdx.x; e < ROWS * dv; e += ROWS * 2) {
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

  // masked softmax, RI rows at a time held in registers; P (keys j >= len:
  // 0) overwrites S in place once the whole warp holds those rows
  constexpr int RI = KPL >= 16 ? 1 : KPL == 8 ? 2 : 4;
  for (int r = r0; r < r0 + 16; r += RI) {
    float v[RI][KPL], mx[RI], sum[RI];
#pragma unroll
    for (int a = 0; a < RI; a++) {
      const float *srow = Ss + (r + a) * ly.lds;
      mx[a] = -INFINITY;
#pragma unroll
      for (int t = 0; t < KPL; t++) {
        const int j = lane + t * RD__WARP;
        v[a][t] = j < len ? srow[j] : -INFINITY;
        mx[a] = fmaxf(mx[a], v[a][t]);
      }
    }
    warp_max_n<RI>(mx);
#pragma unroll
    for (int a = 0; a < RI; a++) {
      sum[a] = 0.0f;
#pragma unroll
      for (int t = 0; t < KPL; t++) {
        v[a][t] = lane + t * RD__WARP < len ? __expf(v[a][t] - mx[a]) : 0.0f;
        sum[a] += v[a][t];
      }
    }
    warp_sum_n<RI>(sum);  // also orders the rows' reads before the writes
    __syncwarp();
#pragma unroll
    for (int a = 0; a < RI; a++) {
      T *prow = (T *)(Ss + (r + a) * ly.lds);
      const float inv = 1.0f / sum[a];
#pragma unroll
      for (int t = 0; t < KPL; t++) {
        const int j = lane + t * RD__WARP;
        if (j < ly.Lp) prow[j] = rd__ty<T>::from(v[a][t] * inv);
      }
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

// the kernel for a padded length
template <typename T>
static auto at_kernel(int Lp) {
  return Lp <= 32    ? rd__attention_kernel<T, 1, at_rows(32)>
         : Lp <= 64  ? rd__attention_kernel<T, 2, at_rows(64)>
         : Lp <= 128 ? rd__attention_kernel<T, 4, at_rows(128)>
         : Lp <= 256 ? rd__attention_kernel<T, 8, at_rows(256)>
                     : rd__attention_kernel<T, 16, at_rows(512)>;
}

size_t rd__cuda_attention_smem(int L, int dh) {
  if (dh % 16 || dh > RD__AT_MAX_DH || L > RD__AT_MAX_KEYS) return (size_t)-1;  // not supported
  size_t most = 0;  // not monotonic in L: the rows per block change at 80 and 272
  for (int l = 16; l < L + 16; l += 16) {
    const size_t b = at_layout(l < L ? l : L, dh).bytes();
    most = b > most ? b : most;
  }
  return most;
}

template <typename T>
cudaError_t rd__cuda_attention_prepare(size_t smem) {
  for (int Lp = 32; Lp <= RD__AT_MAX_KEYS; Lp *= 2) {
    cudaError_t e = cudaFuncSetAttribute(at_kernel<T>(Lp), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <typename T>
void rd__cuda_attention(const T *qkv, const float *bias, const int32_t *lens, T *out, int B, int L,
                        int heads, int dh, float qscale, cudaStream_t s) {
  if (!B || !L) return;
  const at_layout ly(L, dh);
  dim3 grid((unsigned)((L + ly.rows - 1) / ly.rows), (unsigned)heads, (unsigned)B);
  at_kernel<T>(ly.Lp)<<<grid, ly.rows * 2, ly.bytes(), s>>>(qkv, bias, lens, out, L, heads, dh, qscale);
}

template cudaError_t rd__cuda_attention_prepare<__half>(size_t);
template cudaError_t rd__cuda_attention_prepare<__nv_bfloat16>(size_t);
template void rd__cuda_attention<__half>(const __half *, const float *, const int32_t *, __half *,
                                         int, int, int, int, float, cudaStream_t);
template void rd__cuda_attention<__nv_bfloat16>(const __nv_bfloat16 *, const float *,
                                                const int32_t *, __nv_bfloat16 *, int, int, int,
                                                int, float, cudaStream_t);
