// Conversions fp32 <-> bf16 / fp16: exact round trips, round to nearest even,
// NaN / Inf / subnormals. Expected bit patterns follow from the IEEE formats.
#include "kernels/dtype_convert.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gdn {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
uint32_t Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

TEST(DtypeConvertTest, Bf16RoundTripsEveryNonNanPatternExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBf16(f), h) << std::hex << h;
  }
}

TEST(DtypeConvertTest, HalfRoundTripsEveryNonNanPatternExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToHalf(f), h) << std::hex << h;
  }
}

TEST(DtypeConvertTest, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 1.0 (0x3f80) and 1 + 2^-7 (0x3f81):
  // ties go to the even mantissa (0x3f80); 1 + 3 * 2^-8 ties up to 0x3f82.
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // Just above the halfway point rounds up.
  EXPECT_EQ(FloatToBf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)),
            0x3f81);
  // The largest finite float rounds to Inf in bf16 (it is above the last
  // bf16 finite value plus half an ulp).
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
}

TEST(DtypeConvertTest, HalfRoundsToNearestEven) {
  // Half has 10 mantissa bits: 1 + 2^-11 ties to 1.0 (0x3c00),
  // 1 + 3 * 2^-11 ties up to 0x3c02.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // 65504 is the largest half; 65520 is the rounding boundary to Inf.
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xfc00);
}

TEST(DtypeConvertTest, HalfSubnormalsAreExact) {
  // Smallest half subnormal 2^-24 and largest (1023 * 2^-24).
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x03ff), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  // Half of the smallest subnormal ties to even (zero); a bit more rounds up.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  // 1.5 * 2^-24 ties to 2 * 2^-24 (even).
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
}

TEST(DtypeConvertTest, Bf16SubnormalsAreExact) {
  // bf16 keeps fp32's exponent range: fp32 subnormals survive.
  const float tiny = FromBits(0x00010000u);  // a subnormal float
  EXPECT_EQ(FloatToBf16(tiny), 0x0001);
  EXPECT_EQ(Bf16ToFloat(0x0001), tiny);
}

TEST(DtypeConvertTest, NanStaysNanAndInfStaysInf) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float signalling = FromBits(0x7f800001u);  // NaN with only a low bit
  EXPECT_EQ(FloatToBf16(inf), 0x7f80);
  EXPECT_EQ(FloatToBf16(-inf), 0xff80);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(nan))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(signalling))))
      << "truncation alone would turn this NaN into Inf";
  EXPECT_EQ(FloatToHalf(inf), 0x7c00);
  EXPECT_EQ(FloatToHalf(-inf), 0xfc00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(nan))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(signalling))));
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));
}

TEST(DtypeConvertTest, RoundingErrorIsAtMostHalfAnUlp) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (int i = 0; i < 10000; ++i) {
    const float x = normal(rng);
    const float b = Bf16ToFloat(FloatToBf16(x));
    const float h = HalfToFloat(FloatToHalf(x));
    // Ulps at |x|: 2^(e - 7) for bf16, 2^(e - 10) for half (normal range).
    const int e = std::ilogb(x);
    EXPECT_LE(std::abs(b - x), std::ldexp(1.0f, e - 8)) << x;
    if (std::abs(x) >= std::ldexp(1.0f, -14)) {
      EXPECT_LE(std::abs(h - x), std::ldexp(1.0f, e - 11)) << x;
    }
  }
}

TEST(DtypeConvertTest, BulkConversionsMatchScalarOnes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> values(257);
  for (float& v : values) v = normal(rng);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<uint8_t> bytes(values.size() * DTypeSize(dtype));
    ConvertFromFloat(values.data(), values.size(), dtype, bytes.data());
    std::vector<float> back(values.size());
    ConvertToFloat(bytes.data(), dtype, values.size(), back.data());
    std::vector<float> rounded = values;
    RoundThrough(dtype, rounded.data(), rounded.size());
    for (size_t i = 0; i < values.size(); ++i) {
      uint8_t one[4];
      StoreFromFloat(one, dtype, 0, values[i]);
      EXPECT_EQ(Bits(back[i]), Bits(LoadAsFloat(one, dtype, 0)));
      EXPECT_EQ(Bits(back[i]), Bits(rounded[i]));
    }
    if (dtype == DType::kF32) {
      EXPECT_EQ(back, values);
    }
  }
}

}  // namespace
}  // namespace gdn
