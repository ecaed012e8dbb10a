// The shared test-input library: profiles give the g / beta they promise (in
// both gating modes, as the kernels compute them in fp32), inputs are
// rounded to the wire dtype, seeds are deterministic, Compare is honest.
#include "kernels/testing/gdn_test_inputs.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "kernels/dtype_convert.h"
#include "kernels/gating.h"

namespace gdn::testing {
namespace {

GdnOptions Small(GatingMode gating, bool l2 = true, DType in = DType::kBF16) {
  GdnOptions options;
  options.shape = {2, 4, 64, 128};
  options.gating = gating;
  options.l2_norm_qk = l2;
  options.input_dtype = in;
  return options;
}

// fp32 g and beta per (token, head), as a kernel computes them.
void Gates(const GdnOptions& options, const oracle::Inputs& in,
           std::vector<float>* g, std::vector<float>* beta) {
  const int hv = options.shape.num_v_heads;
  for (int t = 0; t < in.total_tokens(); ++t) {
    for (int h = 0; h < hv; ++h) {
      if (options.gating == GatingMode::kDirect) {
        g->push_back(in.g[t * hv + h]);
        beta->push_back(in.beta[t * hv + h]);
      } else {
        g->push_back(FusedDecay(in.a[t * hv + h], in.A_log[h], in.dt_bias[h]));
        beta->push_back(FusedBeta(in.b[t * hv + h]));
      }
    }
  }
}

TEST(GdnTestInputsTest, ShapesAndCuSeqlens) {
  const GdnOptions options = Small(GatingMode::kDirect);
  const oracle::Inputs in = MakeRandomInputs(options, {3, 1, 5}, 1, true);
  EXPECT_EQ(in.cu_seqlens, (std::vector<int32_t>{0, 3, 4, 9}));
  EXPECT_EQ(in.q.size(), 9u * 2 * 64);
  EXPECT_EQ(in.k.size(), 9u * 2 * 64);
  EXPECT_EQ(in.v.size(), 9u * 4 * 128);
  EXPECT_EQ(in.g.size(), 9u * 4);
  EXPECT_TRUE(in.a.empty());
  ASSERT_EQ(in.initial_states.size(), 3u);
  for (const auto& s : in.initial_states) EXPECT_EQ(s.size(), 4u * 64 * 128);
  const oracle::Inputs zero = MakeRandomInputs(options, {3, 1}, 1, false);
  for (const auto& s : zero.initial_states) EXPECT_TRUE(s.empty());
}

TEST(GdnTestInputsTest, DeterministicInSeed) {
  const GdnOptions options = Small(GatingMode::kFused);
  const oracle::Inputs a = MakeRandomInputs(options, {4}, 5, true);
  const oracle::Inputs b = MakeRandomInputs(options, {4}, 5, true);
  const oracle::Inputs c = MakeRandomInputs(options, {4}, 6, true);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.a, b.a);
  EXPECT_EQ(a.initial_states, b.initial_states);
  EXPECT_NE(a.q, c.q);
  EXPECT_NE(a.v, c.v);
}

TEST(GdnTestInputsTest, ValuesAreRoundedToTheirDtypes) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    GdnOptions options = Small(GatingMode::kDirect, true, dtype);
    options.state_dtype = StateDType::kBF16;
    const oracle::Inputs in = MakeRandomInputs(options, {6}, 2, true);
    for (const std::vector<float>* x : {&in.q, &in.k, &in.v}) {
      std::vector<float> again = *x;
      RoundThrough(dtype, again.data(), again.size());
      EXPECT_EQ(again, *x) << DTypeName(dtype);
    }
    std::vector<float> state = in.initial_states[0];
    RoundThroughState(StateDType::kBF16, &state);
    EXPECT_EQ(state, in.initial_states[0]);
  }
}

TEST(GdnTestInputsTest, QkAreUnitOnlyWhenTheKernelDoesNotNormalise) {
  for (bool l2 : {true, false}) {
    const GdnOptions options = Small(GatingMode::kDirect, l2, DType::kF32);
    const oracle::Inputs in = MakeRandomInputs(options, {10}, 3, false);
    double max_dev = 0;
    for (size_t row = 0; row < in.k.size() / 64; ++row) {
      double sum = 0;
      for (int i = 0; i < 64; ++i) sum += double(in.k[row * 64 + i]) * in.k[row * 64 + i];
      max_dev = std::max(max_dev, std::abs(std::sqrt(sum) - 1.0));
    }
    if (l2) {
      EXPECT_GT(max_dev, 0.1) << "raw randn rows (norm ~8) expected";
    } else {
      EXPECT_LT(max_dev, 1e-5);
    }
  }
}

TEST(GdnTestInputsTest, ProfilesGiveTheirGatesInBothModes) {
  for (GatingMode mode : {GatingMode::kDirect, GatingMode::kFused}) {
    const GdnOptions options = Small(mode);
    for (GateProfile profile :
         {GateProfile::kRandom, GateProfile::kNoDecay, GateProfile::kStrongDecay,
          GateProfile::kBetaZero, GateProfile::kBetaOne}) {
      const oracle::Inputs in = MakeRandomInputs(options, {50}, 4, true, profile);
      std::vector<float> g, beta;
      Gates(options, in, &g, &beta);
      SCOPED_TRACE(std::string(GatingModeName(mode)) + " " + GateProfileName(profile));
      double mean_g = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        ASSERT_TRUE(std::isfinite(g[i]) && std::isfinite(beta[i]));
        ASSERT_LE(g[i], 0.0f);
        ASSERT_GE(beta[i], 0.0f);
        ASSERT_LE(beta[i], 1.0f);
        mean_g += g[i] / g.size();
        switch (profile) {
          case GateProfile::kNoDecay: ASSERT_EQ(g[i], 0.0f); break;
          case GateProfile::kStrongDecay:
            ASSERT_LE(g[i], -5.0f);
            ASSERT_GE(g[i], -25.0f);
            break;
          case GateProfile::kBetaZero: ASSERT_EQ(beta[i], 0.0f); break;
          case GateProfile::kBetaOne: ASSERT_EQ(beta[i], 1.0f); break;
          case GateProfile::kRandom:
            ASSERT_GT(beta[i], 0.0f);
            ASSERT_LT(beta[i], 1.0f);
            break;
        }
      }
      if (profile == GateProfile::kRandom) {
        // logsigmoid(randn) / 16 averages about -0.05.
        EXPECT_LT(mean_g, -0.01);
        EXPECT_GT(mean_g, -0.2);
      }
    }
  }
}

TEST(GdnTestInputsTest, SliceAndConcatRebuildTheBatch) {
  const GdnOptions options = Small(GatingMode::kFused);
  const oracle::Inputs in = MakeRandomInputs(options, {3, 5}, 7, true);
  const oracle::Inputs rebuilt = ConcatSequences(
      {SliceSequence(options, in, 0, 0, 3, in.initial_states[0]),
       SliceSequence(options, in, 1, 0, 2, in.initial_states[1]),
       SliceSequence(options, in, 1, 2, 5, {})});
  EXPECT_EQ(rebuilt.cu_seqlens, (std::vector<int32_t>{0, 3, 5, 8}));
  EXPECT_EQ(rebuilt.q, in.q);
  EXPECT_EQ(rebuilt.v, in.v);
  EXPECT_EQ(rebuilt.a, in.a);
  EXPECT_EQ(rebuilt.A_log, in.A_log);
  EXPECT_EQ(rebuilt.initial_states[1], in.initial_states[1]);
  EXPECT_TRUE(rebuilt.initial_states[2].empty());
}

TEST(ErrorStatsTest, ComparesAgainstTheReference) {
  const std::vector<double> ref = {1.0, -2.0, 4.0, 0.0};
  const std::vector<float> same = {1.0f, -2.0f, 4.0f, 0.0f};
  ErrorStats e = Compare(same.data(), ref.data(), ref.size());
  EXPECT_EQ(e.max_abs_rel, 0.0);
  EXPECT_EQ(e.rel_l2, 0.0);
  EXPECT_EQ(e.nonfinite, 0);

  const std::vector<float> off = {1.0f, -2.0f, 4.4f, 0.0f};
  e = Compare(off.data(), ref.data(), ref.size());
  EXPECT_NEAR(e.max_abs_rel, 0.4 / 4.0, 1e-6);
  EXPECT_NEAR(e.rel_l2, 0.4 / std::sqrt(21.0), 1e-6);

  const std::vector<float> bad = {std::numeric_limits<float>::quiet_NaN(), -2.0f,
                                  std::numeric_limits<float>::infinity(), 0.0f};
  e = Compare(bad.data(), ref.data(), ref.size());
  EXPECT_EQ(e.nonfinite, 2);
  EXPECT_FALSE(e.max_abs_rel <= 1.0);  // fails any tolerance
  EXPECT_FALSE(e.rel_l2 <= 1.0);
}

}  // namespace
}  // namespace gdn::testing
