// Host rounding to and from the 16-bit input dtypes (bf16 / fp16 bit
// patterns in uint16_t), for the tests that build device inputs by hand
// (tprep_test.cu, fused_chunk_problem.h). Test-only; needs nvcc's
// cuda_bf16.h / cuda_fp16.h host conversions.
#ifndef GDN_TESTS_GPU_INPUT_BITS_H_
#define GDN_TESTS_GPU_INPUT_BITS_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/gdn_types.h"

namespace gdn::gpu_test {

// x rounded to nearest in dt (bf16, else fp16), as its bits.
inline uint16_t ToBits(double x, DType dt) {
  if (dt == DType::kBF16) {
    const __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(x));
    return *reinterpret_cast<const uint16_t*>(&h);
  }
  const __half h = __float2half_rn(static_cast<float>(x));
  return *reinterpret_cast<const uint16_t*>(&h);
}

// The value of dt's bits b (exact in float).
inline float FromBits(uint16_t b, DType dt) {
  if (dt == DType::kBF16) {
    __nv_bfloat16 h;
    *reinterpret_cast<uint16_t*>(&h) = b;
    return __bfloat162float(h);
  }
  __half h;
  *reinterpret_cast<uint16_t*>(&h) = b;
  return __half2float(h);
}

}  // namespace gdn::gpu_test

#endif  // GDN_TESTS_GPU_INPUT_BITS_H_
