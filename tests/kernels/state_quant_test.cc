// The int8 / fp8 element arithmetic of kernels/state_quant.h: exact codes,
// round to nearest even, stochastic rounding's unbiasedness and its
// determinism, group scales (zero, tiny, NaN groups) and the e4m3 table.
#include "kernels/state_quant.h"

#include <cmath>
#include <cstdint>
#include <set>

#include "gtest/gtest.h"

namespace gdn::quant {
namespace {

TEST(StateQuantTest, Fp8DecodeIsTheE4m3Table) {
  EXPECT_EQ(DecodeFp8(0x00), 0.0f);
  EXPECT_EQ(DecodeFp8(0x01), 0x1p-9f);   // smallest subnormal
  EXPECT_EQ(DecodeFp8(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(DecodeFp8(0x08), 0x1p-6f);   // smallest normal
  EXPECT_EQ(DecodeFp8(0x38), 1.0f);
  EXPECT_EQ(DecodeFp8(0x39), 1.125f);
  EXPECT_EQ(DecodeFp8(0x7e), 448.0f);
  EXPECT_EQ(DecodeFp8(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(DecodeFp8(0x7f)));
  EXPECT_TRUE(std::isnan(DecodeFp8(0xff)));
  // Strictly increasing over the finite non-negative codes.
  for (int c = 1; c < 0x7f; ++c) EXPECT_LT(DecodeFp8(c - 1), DecodeFp8(c)) << c;
}

TEST(StateQuantTest, Fp8EncodeRecoversEveryCodeAndRoundsToNearestEven) {
  for (int c = 0; c < 0x7f; ++c) {
    for (uint8_t sign : {0x00, 0x80}) {
      const uint8_t code = static_cast<uint8_t>(c | sign);
      EXPECT_EQ(EncodeFp8(DecodeFp8(code), 1.0f, false, 0), code) << c;
      EXPECT_EQ(EncodeFp8(DecodeFp8(code), 1.0f, true, 0xffffffffu), code) << c;
    }
  }
  for (int c = 0; c + 1 < 0x7f; ++c) {
    const float lo = DecodeFp8(c), hi = DecodeFp8(c + 1), mid = (lo + hi) / 2;
    EXPECT_EQ(EncodeFp8(mid, 1.0f, false, 0), (c % 2 == 0) ? c : c + 1) << c;  // tie to even
    EXPECT_EQ(EncodeFp8(lo + (hi - lo) * 0.25f, 1.0f, false, 0), c) << c;
    EXPECT_EQ(EncodeFp8(lo + (hi - lo) * 0.75f, 1.0f, false, 0), c + 1) << c;
  }
  EXPECT_EQ(EncodeFp8(1e9f, 1.0f, false, 0), 0x7e);  // saturates, never NaN
  EXPECT_EQ(EncodeFp8(-1e9f, 1.0f, true, 123), 0xfe);
  EXPECT_EQ(EncodeFp8(NAN, 1.0f, false, 0) & 0x7f, 0x7e);  // finite code even for NaN
}

TEST(StateQuantTest, Int8RoundsToNearestEvenAndClamps) {
  EXPECT_EQ(EncodeInt8(2.5f, 1.0f, false, 0), 2);
  EXPECT_EQ(EncodeInt8(3.5f, 1.0f, false, 0), 4);
  EXPECT_EQ(EncodeInt8(-2.5f, 1.0f, false, 0), -2);
  EXPECT_EQ(EncodeInt8(0.49f, 1.0f, false, 0), 0);
  EXPECT_EQ(EncodeInt8(1000.0f, 1.0f, false, 0), 127);
  EXPECT_EQ(EncodeInt8(-1000.0f, 1.0f, true, 77), -127);
  EXPECT_EQ(EncodeInt8(NAN, 1.0f, false, 0), -127);  // defined, no UB
  EXPECT_EQ(EncodeInt8(3.0f, 0.5f, false, 0), 2);     // x * inv: 1.5 -> 2
}

// Stochastic rounding rounds up with probability frac: the mean of many
// draws (different element indices) is the value itself.
TEST(StateQuantTest, StochasticRoundingIsUnbiased) {
  for (float y : {0.3f, 5.75f, -17.125f, 126.9f, -0.01f}) {
    double sum = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
      sum += EncodeInt8(y, 1.0f, true, ElementBits(12345, static_cast<uint32_t>(i)));
    }
    EXPECT_NEAR(sum / n, y, 0.01) << y;
  }
  for (float y : {0.3f, 1.06f, 3.3f, 300.0f, 0.004f, -0.7f}) {  // normals and subnormals
    double sum = 0;
    const int n = 200000;
    std::set<int> codes;
    for (int i = 0; i < n; ++i) {
      const uint8_t c = EncodeFp8(y, 1.0f, true, ElementBits(999, static_cast<uint32_t>(i)));
      codes.insert(c);
      sum += DecodeFp8(c);
    }
    EXPECT_EQ(codes.size(), 2u) << y;  // only the two neighbours
    EXPECT_NEAR(sum / n, y, std::fabs(y) * 0.005 + 1e-5) << y;
  }
}

TEST(StateQuantTest, RandomBitsAreAPureFunctionOfSaltAndIndex) {
  EXPECT_EQ(ElementBits(7, 11), ElementBits(7, 11));
  EXPECT_NE(ElementBits(7, 11), ElementBits(7, 12));
  EXPECT_NE(ElementBits(7, 11), ElementBits(8, 11));
  EXPECT_EQ(RoundingSalt(-0.5f, 0.25f), RoundingSalt(-0.5f, 0.25f));
  EXPECT_NE(RoundingSalt(-0.5f, 0.25f), RoundingSalt(-0.5f, 0.26f));
  EXPECT_NE(RoundingSalt(-0.5f, 0.25f), RoundingSalt(0.25f, -0.5f));
  // Roughly uniform: the top bit is set about half the time.
  int ones = 0;
  for (uint32_t i = 0; i < 10000; ++i) ones += ElementBits(3, i) >> 31;
  EXPECT_NEAR(ones, 5000, 300);
}

TEST(StateQuantTest, GroupScales) {
  const GroupScale g = GroupScaleFor(AbsBits(-254.0f), kInt8Max);
  EXPECT_FLOAT_EQ(g.scale, 2.0f);
  EXPECT_FLOAT_EQ(g.inv, 0.5f);
  const GroupScale zero = GroupScaleFor(AbsBits(0.0f), kFp8Max);
  EXPECT_EQ(zero.scale, kZeroGroupScale);
  EXPECT_EQ(zero.inv, 0.0f);
  EXPECT_EQ(GroupScaleFor(AbsBits(1e-35f), kInt8Max).inv, 0.0f);  // below kMinGroupAmax
  EXPECT_TRUE(std::isnan(GroupScaleFor(AbsBits(INFINITY), kInt8Max).scale));
  EXPECT_TRUE(std::isnan(GroupScaleFor(AbsBits(NAN), kFp8Max).scale));
  // AbsBits order is |x| order, NaN above everything.
  EXPECT_LT(AbsBits(-1.0f), AbsBits(2.0f));
  EXPECT_LT(AbsBits(3e38f), AbsBits(INFINITY));
  EXPECT_LT(AbsBits(INFINITY), AbsBits(NAN));
  // The largest finite group still has finite scales both ways.
  const GroupScale big = GroupScaleFor(AbsBits(3.4e38f), kFp8Max);
  EXPECT_TRUE(std::isfinite(big.scale) && std::isfinite(big.inv) && big.inv > 0);
  const GroupScale tiny = GroupScaleFor(AbsBits(kMinGroupAmax), kInt8Max);
  EXPECT_TRUE(std::isfinite(tiny.inv) && tiny.scale > 0);
}

}  // namespace
}  // namespace gdn::quant
