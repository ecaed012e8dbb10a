// Round-to-nearest int8 / fp8 (e4m3) state codes in a few instructions
// (device code), for every quantised store: the recurrent kernel's tile
// store (recurrent_quant.cuh) and the chunked prefill's page stores
// (chunked/fused_chunk_tiles.cuh, chunked/state_tile.cuh). Bit for bit
// kernels/state_quant.h's EncodeInt8 / EncodeFp8(x, inv, false, 0) for
// y = x * inv of a finite group (scale not NaN); tests/gpu/
// quantized_codec_test.cu sweeps both against the host encoders.
//
// y must be rounded on its own (__fmul_rn(x, inv)): state_quant.h rounds
// x * inv to fp32 before encoding, and an int8 add fused into an FMA with
// that product would round once, differently, near ties.
//
// Stochastic rounding and groups with a NaN scale (the hardware gives NaN
// codes where state_quant.h clamps) keep state_quant.h's software encoders.
#ifndef GDN_KERNELS_CUDA_COMMON_STATE_CODES_CUH_
#define GDN_KERNELS_CUDA_COMMON_STATE_CODES_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace gdn::cuda {

// int8: |y| <= 127 (+ rounding of inv) < 127.5, so y + 1.5 * 2^23 lands in
// [2^23, 2^24), where the float's unit is 1: the add rounds y to nearest
// even and its low mantissa byte is the two's-complement code (EncodeInt8's
// clamp never binds for a finite group: |x| <= amax). The code is the low
// byte of the result.
__device__ __forceinline__ uint32_t Int8NearestBits(float y) {
  return __float_as_uint(y + 12582912.0f);
}

// fp8 e4m3: two codes in one cvt (round to nearest even, subnormals,
// saturation at 448 = EncodeFp8's clamp; -0 keeps its sign); y0's code in
// the low byte, y1's in the high one.
__device__ __forceinline__ uint16_t Fp8PairNearest(float y0, float y1) {
  uint16_t pair;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(y1), "f"(y0));
  return pair;
}

// Four fp8 codes (y[i]'s in byte i): two cvts whose halves merge in one
// register. Two Fp8PairNearest and a byte permute cost the recurrent
// decode's store 1.5-2% (H100, bench/results/2026-12-05-quant-store).
__device__ __forceinline__ uint32_t Fp8NearestWord(const float* y) {
  uint32_t word;
  asm("{\n .reg .b16 lo, hi;\n"
      " cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
      " cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      " mov.b32 %0, {lo, hi};\n}"
      : "=r"(word)
      : "f"(y[0]), "f"(y[1]), "f"(y[2]), "f"(y[3]));
  return word;
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_COMMON_STATE_CODES_CUH_
