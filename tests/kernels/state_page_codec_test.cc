// State pages of every dtype through kernels/state_page_codec.h: the page
// layout (scales after the codes, capacity against fp32), round trips within
// half a quantisation step, column ranges equal to whole pages, zero and
// non-finite groups, and determinism of stochastic stores.
#include "kernels/state_page_codec.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gdn_types.h"
#include "kernels/state_quant.h"

namespace gdn {
namespace {

StatePageFormat Format(StateDType dtype, int hv, int k, int v,
                       StateRounding r = StateRounding::kNearest) {
  StatePageFormat f;
  f.dtype = dtype;
  f.rounding = r;
  f.num_v_heads = hv;
  f.head_dim_k = k;
  f.head_dim_v = v;
  return f;
}

std::vector<float> RandomState(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> s(n);
  for (float& x : s) x = normal(rng);
  return s;
}

TEST(StatePageCodecTest, LayoutAndCapacity) {
  const LayerShape shape;  // Hv 32, K = V = 128
  const StatePageLayout f32 = StatePageLayout::For(shape, StateDType::kF32);
  for (StateDType d : {StateDType::kInt8, StateDType::kFP8}) {
    const StatePageLayout q = StatePageLayout::For(shape, d);
    EXPECT_EQ(q.state_bytes, 32u * 128 * 128);
    EXPECT_EQ(q.scales_bytes, 32u * 128 / kStateScaleCols * 4);
    EXPECT_EQ(q.page_bytes % 256, 0u);
    const double gib = 1u << 30;
    const double ratio = std::floor(gib / q.page_bytes) / std::floor(gib / f32.page_bytes);
    EXPECT_GE(ratio, 3.9) << StateDTypeName(d);  // issue 19's capacity target
    const StatePageFormat format = Format(d, 32, 128, 128);
    EXPECT_EQ(format.payload_bytes(), q.state_bytes + q.scales_bytes);
  }
  EXPECT_EQ(StatePageLayout::For(shape, StateDType::kBF16).scales_bytes, 0u);
}

TEST(StatePageCodecTest, RoundTripWithinHalfAStep) {
  for (StateDType d : {StateDType::kF32, StateDType::kBF16, StateDType::kInt8, StateDType::kFP8}) {
    for (auto [hv, k, v] : {std::tuple{1, 64, 64}, {3, 128, 64}, {2, 64, 128}}) {
      const StatePageFormat f = Format(d, hv, k, v);
      const std::vector<float> s = RandomState(f.elements(), 5);
      std::vector<uint8_t> page(f.payload_bytes());
      EncodeStatePage(f, s.data(), {}, page.data());
      const std::vector<float> back = DecodeStatePage(f, page.data());
      for (int h = 0; h < hv; ++h) {
        for (int c = 0; c < v; c += f.scale_cols) {
          float amax = 0;
          for (int i = 0; i < k; ++i)
            for (int j = 0; j < f.scale_cols; ++j)
              amax = std::max(amax, std::fabs(s[(size_t(h) * k + i) * v + c + j]));
          for (int i = 0; i < k; ++i) {
            for (int j = 0; j < f.scale_cols; ++j) {
              const size_t at = (size_t(h) * k + i) * v + c + j;
              const float x = s[at], y = back[at];
              double bound = 0;
              switch (d) {
                case StateDType::kF32: bound = 0; break;
                case StateDType::kBF16: bound = std::fabs(x) * 0x1p-8; break;
                case StateDType::kInt8: bound = amax / 127 * 0.5001; break;
                case StateDType::kFP8:  // 3 mantissa bits; subnormals step 2^-9 of scale
                  bound = std::max(std::fabs(x) * 0x1p-4, amax / 448 * 0x1p-10) * 1.0001;
                  break;
              }
              ASSERT_LE(std::fabs(x - y), bound) << StateDTypeName(d) << " at " << at;
            }
          }
          if (IsQuantizedState(d)) {
            EXPECT_FLOAT_EQ(StatePageScale(f, page.data(), h, c / f.scale_cols),
                            amax / (d == StateDType::kInt8 ? 127.0f : 448.0f));
          }
        }
      }
    }
  }
}

TEST(StatePageCodecTest, ColumnRangesWriteOnlyTheirGroups) {
  const StatePageFormat f = Format(StateDType::kInt8, 2, 64, 64, StateRounding::kStochastic);
  const std::vector<float> s = RandomState(f.elements(), 7);
  std::vector<uint8_t> whole(f.payload_bytes()), pieces(f.payload_bytes(), 0xab);
  EncodeStatePage(f, s.data(), {11, 22}, whole.data());
  for (int h = 0; h < 2; ++h) {
    for (int c0 = 0; c0 < 64; c0 += 16) {
      // A [K][16] slab, the cpu backend's layout.
      std::vector<float> slab(64 * 16);
      for (int i = 0; i < 64; ++i)
        for (int j = 0; j < 16; ++j) slab[i * 16 + j] = s[(size_t(h) * 64 + i) * 64 + c0 + j];
      EncodeStateColumns(f, h, c0, 16, slab.data(), 16, h == 0 ? 11 : 22, pieces.data());
      std::vector<float> back(64 * 16);
      DecodeStateColumns(f, pieces.data(), h, c0, 16, back.data(), 16);
      for (int i = 0; i < 64; ++i)
        for (int j = 0; j < 16; ++j)
          EXPECT_NEAR(back[i * 16 + j], slab[i * 16 + j], 0.02);
    }
  }
  EXPECT_EQ(whole, pieces);  // same bytes, same random bits
}

TEST(StatePageCodecTest, StochasticStoresAreDeterministicAndSaltDependent) {
  const StatePageFormat f = Format(StateDType::kFP8, 2, 64, 64, StateRounding::kStochastic);
  const std::vector<float> s = RandomState(f.elements(), 9);
  std::vector<uint8_t> a(f.payload_bytes()), b(f.payload_bytes()), c(f.payload_bytes());
  EncodeStatePage(f, s.data(), {1, 2}, a.data());
  EncodeStatePage(f, s.data(), {1, 2}, b.data());
  EncodeStatePage(f, s.data(), {3, 2}, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Head 1 has the same salt in a and c: identical codes there.
  const size_t head = 64 * 64;
  EXPECT_EQ(std::memcmp(a.data() + head, c.data() + head, head), 0);
}

TEST(StatePageCodecTest, ZeroAndNonFiniteGroups) {
  const StatePageFormat f = Format(StateDType::kInt8, 1, 64, 64);
  std::vector<float> s(f.elements(), 0.0f);
  s[5] = 1e-35f;                  // group 2: below kMinGroupAmax -> zeros
  s[64 * 3 + 10] = NAN;           // group 5: NaN scale
  s[64 * 7 + 20] = 2.0f;          // group 10: normal
  std::vector<uint8_t> page(f.payload_bytes());
  EncodeStatePage(f, s.data(), {}, page.data());
  const std::vector<float> back = DecodeStatePage(f, page.data());
  EXPECT_EQ(StatePageScale(f, page.data(), 0, 0), quant::kZeroGroupScale);
  EXPECT_EQ(back[5], 0.0f);
  EXPECT_TRUE(std::isnan(StatePageScale(f, page.data(), 0, 5)));
  EXPECT_TRUE(std::isnan(back[64 * 3 + 10]));
  EXPECT_FLOAT_EQ(back[64 * 7 + 20], 2.0f);
  EXPECT_EQ(back[64 * 7 + 21], 0.0f);
}

TEST(StatePageCodecTest, RoundTripIsIdempotentWithNearestRounding) {
  for (StateDType d : {StateDType::kInt8, StateDType::kFP8}) {
    const StatePageFormat f = Format(d, 2, 64, 128);
    std::vector<float> s = RandomState(f.elements(), 13);
    RoundTripState(f, {}, &s);
    std::vector<float> again = s;
    RoundTripState(f, {}, &again);
    for (size_t i = 0; i < s.size(); ++i) {
      ASSERT_NEAR(again[i], s[i], std::fabs(s[i]) * 1e-6) << i;
    }
  }
}

}  // namespace
}  // namespace gdn
