#include "kernels/dtype_convert.h"

#include <cmath>

namespace gdn {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: value = mantissa * 2^-24
      float f = std::ldexp(static_cast<float>(mantissa), -24);
      std::memcpy(&bits, &f, sizeof(bits));
      bits |= sign;
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) {  // Inf or NaN
    return sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x200u : 0);
  }
  if (abs_bits >= 0x477ff000u) {  // rounds to >= 65520: overflow to Inf
    return sign | 0x7c00u;
  }
  if (abs_bits < 0x38800000u) {  // below 2^-14: subnormal half or zero
    // Value in units of 2^-24, rounded to nearest even by the FPU.
    float abs_f;
    std::memcpy(&abs_f, &abs_bits, sizeof(abs_f));
    const float scaled = abs_f * 16777216.0f;  // exact (power of two)
    const float rounded = std::nearbyint(scaled);
    return sign | static_cast<uint16_t>(rounded);
  }
  // Normal: rebias the exponent, round the 13 dropped bits to nearest even.
  const uint32_t rebased = abs_bits - (112u << 23);
  const uint32_t rounding_bias = 0xfffu + ((rebased >> 13) & 1u);
  return sign | static_cast<uint16_t>((rebased + rounding_bias) >> 13);
}

void ConvertToFloat(const void* src, DType dtype, size_t n, float* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = LoadAsFloat(src, dtype, i);
}

void ConvertFromFloat(const float* src, size_t n, DType dtype, void* dst) {
  for (size_t i = 0; i < n; ++i) StoreFromFloat(dst, dtype, i, src[i]);
}

void RoundThrough(DType dtype, float* values, size_t n) {
  if (dtype == DType::kF32) return;
  for (size_t i = 0; i < n; ++i) {
    uint16_t tmp;
    StoreFromFloat(&tmp, dtype, 0, values[i]);
    values[i] = LoadAsFloat(&tmp, dtype, 0);
  }
}

}  // namespace gdn
