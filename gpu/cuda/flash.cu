// flash.cu - launcher of the register-resident attention kernel (the body is
// in flash.cuh, shared with its CPU emulation test).  RD_ENGINE_ATTN_FLASH.
#include "flash.cuh"
#include "ops.cuh"

template <typename T, int DH>
__global__ void __launch_bounds__(32 * RD_FA_MAX_WARPS)
    rd__flash_kernel(const T *__restrict__ qkv, const float *__restrict__ bias,
                     const int32_t *__restrict__ lens, T *__restrict__ out, int L, int heads,
                     float qscale) {
  extern __shared__ __align__(16) unsigned char rd__fa_sm[];
  rd__fa_body<T, DH>(qkv, bias, lens, out, L, heads, qscale, reinterpret_cast<T *>(rd__fa_sm));
}

size_t rd__cuda_flash_smem(int L, int dh) {
  if ((dh != 32 && dh != 64) || L > RD_FA_MAX_KEYS || L < 1) return (size_t)-1;
  return rd__fa_layout(L, dh).elems(dh) * 2;  // grows with L: the longest pass needs the most
}

template <typename T>
static auto flash_kernel(int dh) {
  return dh == 64 ? rd__flash_kernel<T, 64> : rd__flash_kernel<T, 32>;
}

template <typename T>
cudaError_t rd__cuda_flash_prepare(int dh, size_t smem) {
  return cudaFuncSetAttribute(flash_kernel<T>(dh), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

template <typename T>
void rd__cuda_flash(const T *qkv, const float *bias, const int32_t *lens, T *out, int B, int L,
                    int heads, int dh, float qscale, cudaStream_t s) {
  if (!B || !L) return;
  const int nw = rd__fa_warps(L), rows = 16 * nw;
  dim3 grid((unsigned)((L + rows - 1) / rows), (unsigned)heads, (unsigned)B);
  flash_kernel<T>(dh)<<<grid, 32 * nw, rd__cuda_flash_smem(L, dh), s>>>(qkv, bias, lens, out, L, heads, qscale);
}

template cudaError_t rd__cuda_flash_prepare<__half>(int, size_t);
template cudaError_t rd__cuda_flash_prepare<__nv_bfloat16>(int, size_t);
template void rd__cuda_flash<__half>(const __half *, const float *, const int32_t *, __half *, int,
                                     int, int, int, float, cudaStream_t);
template void rd__cuda_flash<__nv_bfloat16>(const __nv_bfloat16 *, const float *, const int32_t *,
                                            __nv_bfloat16 *, int, int, int, int, float, cudaStream_t);
