// pool.cu - mean pooling over each sequence's real tokens (padding excluded)
// followed by L2 normalisation (eps 1e-12, as torch.nn.functional.normalize).
// One block per sequence.
#include "ops.cuh"

__global__ void rd__mean_pool_l2_kernel(const float *__restrict__ x32, const int32_t *__restrict__ lens,
                                        int L, int H, float *__restrict__ out) {
  const int b = blockIdx.x, len = lens[b];
  const float *x = x32 + (size_t)b * L * H;
  float v[RD__ROW_MAX_PER_THREAD];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < RD__ROW_MAX_PER_THREAD; k++) {
    int c = threadIdx.x + k * RD__ROW_BLOCK;
    float acc = 0.0f;
    if (c < H)
      for (int i = 0; i < len; i++) acc += x[(size_t)i * H + c];
    v[k] = acc / (float)len;
    ss += c < H ? v[k] * v[k] : 0.0f;
  }
  const float nrm = sqrtf(rd__block_sum(ss));
  const float s = 1.0f / fmaxf(nrm, 1e-12f);
#pragma unroll
  for (int k = 0; k < RD__ROW_MAX_PER_THREAD; k++) {
    int c = threadIdx.x + k * RD__ROW_BLOCK;
    if (c < H) out[(size_t)b * H + c] = v[k] * s;
  }
}

void rd__cuda_mean_pool_l2(const float *x32, const int32_t *lens, int B, int L, int H, float *out,
                           cudaStream_t s) {
  if (B) rd__mean_pool_l2_kernel<<<B, RD__ROW_BLOCK, 0, s>>>(x32, lens, L, H, out);
}
