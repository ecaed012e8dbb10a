// Kernel 1's block size and the vector loads of q / k / v rows as fp32
// (chunk_prep_blocked.cuh).
#ifndef GDN_KERNELS_CUDA_CHUNKED_PREP_COMMON_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_PREP_COMMON_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/mma_16bit.cuh"

namespace gdn::cuda::chunked {

// Threads of one kernel-1 block: 8 warps.
inline constexpr int kPrepThreads = 256;

// Eight consecutive elements (16-byte aligned for 2-byte types, 32-byte for
// fp32) as fp32, with vector loads.
__device__ __forceinline__ void Load8(const float* p, float out[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p));
  const float4 b = __ldg(reinterpret_cast<const float4*>(p + 4));
  out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w;
  out[4] = b.x; out[5] = b.y; out[6] = b.z; out[7] = b.w;
}
__device__ __forceinline__ void Load8(const bf16* p, float out[8]) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    out[2 * j] = __uint_as_float(w[j] << 16);             // lower half: lower index
    out[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
  }
}
__device__ __forceinline__ void Load8(const __half* p, float out[8]) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __half22float2(h[j]);
    out[2 * j] = f.x;
    out[2 * j + 1] = f.y;
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_PREP_COMMON_CUH_
