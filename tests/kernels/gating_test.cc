// The fused gating fold (kernels/gating.h) against a float64 reference over
// extreme but finite inputs. The reader folds a / b / A_log / dt_bias into
// g and beta with these functions, and the cpu and cuda kernels call them
// for fused gating, so a NaN or an infinity here becomes a NaN in `o`
// (issue 21, defect 7: A_log = 100, a = -200 made -inf * 0).
#include "kernels/gating.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>

#include "gtest/gtest.h"

namespace gdn {
namespace {

// g = -exp(A_log) * softplus(x) in float64, x being the fp32 sum a + dt_bias
// (the gate's definition). softplus exact: log1p(exp(x)) written so that
// neither branch overflows. Every A_log of the grid has exp(A_log) finite in
// float64, so this is the plain product.
double ReferenceDecay(float x, float a_log) {
  const double xd = x;
  const double softplus = xd > 0 ? xd + std::log1p(std::exp(-xd)) : std::log1p(std::exp(xd));
  return -std::exp(static_cast<double>(a_log)) * softplus;
}

// Distance in units in the last place, across zero and denormals: floats
// map to ordered integers (+0 and -0 both to 0).
int64_t UlpDistance(float x, float y) {
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof(i));
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::llabs(ordered(x) - ordered(y));
}

constexpr float kALogs[] = {-100.0f, -10.0f, 0.0f, 2.77f, 10.0f, 88.0f, 100.0f};
constexpr float kXs[] = {-1e30f, -200.0f, -20.0f, 0.0f, 20.0f, 200.0f, 1e30f};

TEST(GatingTest, FusedDecayIsFiniteAndMatchesFloat64OverExtremes) {
  for (float a_log : kALogs) {
    for (float x : kXs) {
      // a carries x and dt_bias 0, then split across both: the same x.
      for (float dt_bias : {0.0f, 1.0f}) {
        const float a = x - dt_bias;
        if (a + dt_bias != x) continue;  // the split is not exact at this magnitude
        const float g = FusedDecay(a, a_log, dt_bias);
        SCOPED_TRACE(testing::Message() << "A_log=" << a_log << " x=" << x << " a=" << a
                                        << " dt_bias=" << dt_bias << " g=" << g);
        ASSERT_TRUE(std::isfinite(g));
        ASSERT_LE(g, 0.0f);
        const double ref = ReferenceDecay(x, a_log);
        if (ref < static_cast<double>(kMinFusedDecay)) {
          // Below the floor the decay exp(g) is 0 in fp32 either way.
          EXPECT_EQ(g, kMinFusedDecay);
        } else {
          EXPECT_LE(UlpDistance(g, static_cast<float>(ref)), 4) << "ref=" << ref;
        }
      }
    }
  }
}

TEST(GatingTest, FusedDecayMatchesFloat64OverRandomWideInputs) {
  // Both paths (the plain product and the scaled one) and their border:
  // A_log and x uniform over ranges that reach past fp32's exp range.
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> a_logs(-120.0f, 120.0f);
  std::uniform_real_distribution<float> xs(-300.0f, 300.0f);
  for (int i = 0; i < 200000; ++i) {
    const float a_log = a_logs(rng);
    const float x = i % 2 == 0 ? xs(rng) : xs(rng) / 10.0f;
    const float g = FusedDecay(x, a_log, 0.0f);
    const double ref = ReferenceDecay(x, a_log);
    const float want = ref < static_cast<double>(kMinFusedDecay) ? kMinFusedDecay
                                                                 : static_cast<float>(ref);
    ASSERT_LE(UlpDistance(g, want), 4)
        << "A_log=" << a_log << " x=" << x << " g=" << g << " ref=" << ref;
  }
}

TEST(GatingTest, IssueCaseIsATinyNegativeNotNaN) {
  // -exp(100) * softplus(-200) = -exp(-100), a denormal in fp32.
  const float g = FusedDecay(-200.0f, 100.0f, 0.0f);
  EXPECT_TRUE(std::isfinite(g));
  EXPECT_LE(UlpDistance(g, static_cast<float>(-std::exp(-100.0))), 1) << g;
}

TEST(GatingTest, FloorKeepsAChunkPrefixSumFinite) {
  // The chunked prefill sums g over a 64-token chunk (and subtracts two such
  // sums): floored gates must not overflow there.
  float sum = 0.0f;
  for (int i = 0; i < 64; ++i) sum += FusedDecay(1e30f, 88.0f, 0.0f);
  EXPECT_TRUE(std::isfinite(sum));
  EXPECT_TRUE(std::isfinite(sum - kMinFusedDecay));
  EXPECT_EQ(std::exp(kMinFusedDecay), 0.0f);
}

TEST(GatingTest, NaNInputStaysNaN) {
  // Inputs are checked before folding; a NaN must not be hidden as a floor.
  EXPECT_TRUE(std::isnan(FusedDecay(NAN, 100.0f, 0.0f)));
  EXPECT_TRUE(std::isnan(FusedDecay(0.0f, NAN, 0.0f)));
  EXPECT_TRUE(std::isnan(FusedDecay(-1e30f, NAN, 0.0f)));
}

TEST(GatingTest, FusedBetaStaysInUnitIntervalOverExtremes) {
  for (float b : {-FLT_MAX, -1e30f, -200.0f, -20.0f, 0.0f, 20.0f, 200.0f, 1e30f, FLT_MAX}) {
    const float beta = FusedBeta(b);
    SCOPED_TRACE(testing::Message() << "b=" << b << " beta=" << beta);
    ASSERT_TRUE(std::isfinite(beta));
    EXPECT_GE(beta, 0.0f);
    EXPECT_LE(beta, 1.0f);
    const double ref = 1.0 / (1.0 + std::exp(-static_cast<double>(b)));
    EXPECT_LE(UlpDistance(beta, static_cast<float>(ref)), 2);
  }
}

}  // namespace
}  // namespace gdn
