// Host-side conversions between fp32 and the 16-bit wire/storage types.
// Round to nearest even, NaN preserved (quiet), Inf and subnormals exact.
// Used by the oracle, the cpu backend, the server's validation and the client.
#ifndef GDN_KERNELS_DTYPE_CONVERT_H_
#define GDN_KERNELS_DTYPE_CONVERT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/gdn_types.h"

namespace gdn {

inline float Bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  }
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);

// Reads element i of a buffer of `dtype` as fp32.
inline float LoadAsFloat(const void* data, DType dtype, size_t i) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(data)[i];
    case DType::kBF16:
      return Bf16ToFloat(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(data)[i]);
  }
  return 0.0f;
}

// Writes fp32 `value` as element i of a buffer of `dtype` (rounding once).
inline void StoreFromFloat(void* data, DType dtype, size_t i, float value) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(data)[i] = value;
      return;
    case DType::kBF16:
      static_cast<uint16_t*>(data)[i] = FloatToBf16(value);
      return;
    case DType::kF16:
      static_cast<uint16_t*>(data)[i] = FloatToHalf(value);
      return;
  }
}

// Bulk versions over n elements.
void ConvertToFloat(const void* src, DType dtype, size_t n, float* dst);
void ConvertFromFloat(const float* src, size_t n, DType dtype, void* dst);

// Rounds each value through `dtype` and back (what the wire does to it).
void RoundThrough(DType dtype, float* values, size_t n);

}  // namespace gdn

#endif  // GDN_KERNELS_DTYPE_CONVERT_H_
