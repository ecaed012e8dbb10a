// The in-chunk cumulative log decay G_i = g_0 + .. + g_i of a 64-token
// chunk, summed over one warp: shared by v7's kernel 1 (chunk_prep_blocked.cuh)
// and TPrep (tprep_gates.cuh). Device code.
#ifndef GDN_KERNELS_CUDA_CHUNKED_GATE_PREFIX_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_GATE_PREFIX_CUH_

#include <cuda_runtime.h>

namespace gdn::cuda::chunked {

// The inclusive prefix sum G of a chunk's 64 log decays over one warp, two
// per lane: lane l holds g of tokens 2 l (x0) and 2 l + 1 (x1) and gets G0,
// G1 of the same tokens, and g_last = G_63 (= G_{L-1}: padding has g = 0).
__device__ __forceinline__ void WarpChunkPrefix(float x0, float x1, int lane, float& G0,
                                                float& G1, float& g_last) {
  float s = x0 + x1;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, s, off);
    if (lane >= off) s += y;
  }
  float before = __shfl_up_sync(0xffffffffu, s, 1);
  if (lane == 0) before = 0.f;
  G0 = before + x0;
  G1 = before + x0 + x1;
  g_last = __shfl_sync(0xffffffffu, G1, 31);
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_GATE_PREFIX_CUH_
