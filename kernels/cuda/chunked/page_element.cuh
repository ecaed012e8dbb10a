// One element of a state page as fp32, in any state dtype (kernels/
// gdn_types.h StatePageLayout): fp32 and bf16 pages hold [Hv][K][V]
// elements; int8 / fp8 pages hold [Hv][K][V] one-byte codes and then fp32
// scales [Hv][V / kStateScaleCols] (kernels/state_quant.h). Shared by the
// chunked prefill's v7 state tile (state_tile.cuh) and v8's fused kernel
// (fused_chunk_tiles.cuh).
#ifndef GDN_KERNELS_CUDA_CHUNKED_PAGE_ELEMENT_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_PAGE_ELEMENT_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gdn_types.h"
#include "kernels/state_quant.h"

namespace gdn::cuda::chunked {

// Element `at` ((h K + d) V + e) of a page of `dtype` as fp32; int8 / fp8
// codes times the scale of their column pair. codes_bytes = Hv K V (where
// the scales start), col = h V + e.
__device__ __forceinline__ float PageElement(const char* page, StateDType dtype, int64_t at,
                                             int64_t codes_bytes, int64_t col) {
  switch (dtype) {
    case StateDType::kF32: return reinterpret_cast<const float*>(page)[at];
    case StateDType::kBF16:
      return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(page)[at]);
    case StateDType::kInt8:
    case StateDType::kFP8: {
      const float scale =
          reinterpret_cast<const float*>(page + codes_bytes)[col / kStateScaleCols];
      const uint8_t code = reinterpret_cast<const uint8_t*>(page)[at];
      return (dtype == StateDType::kInt8 ? quant::DecodeInt8(static_cast<int8_t>(code))
                                         : quant::DecodeFp8(code)) *
             scale;
    }
  }
  return 0.f;
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_PAGE_ELEMENT_CUH_
