// The drift study's pieces (bench/eval/state_drift.h) on short chains: the
// fp32 chain stays at fp32 noise, every compressed variant's error is
// bounded and finite, runs are deterministic, variant names parse.
#include "bench/eval/state_drift.h"

#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"

namespace gdn::eval {
namespace {

DriftConfig Short(DriftGating gating) {
  DriftConfig c;
  c.heads = 1;
  c.dim = 64;
  c.steps = 300;
  c.gating = gating;
  return c;
}

TEST(StateDriftTest, VariantsParse) {
  absl::StatusOr<DriftVariant> v = ParseDriftVariant("fp8-nearest-c32");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->dtype, StateDType::kFP8);
  EXPECT_EQ(v->rounding, StateRounding::kNearest);
  EXPECT_EQ(v->scale_cols, 32);
  v = ParseDriftVariant("int8+r4");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->residual);
  EXPECT_EQ(v->rounding, StateRounding::kStochastic);
  EXPECT_FALSE(ParseDriftVariant("int4").ok());
  EXPECT_FALSE(ParseDriftVariant("int8-c3").ok());
  EXPECT_FALSE(ParseDriftVariant("fp32-nearest").ok());
  EXPECT_EQ(StandardDriftVariants().size(), 12u);
}

TEST(StateDriftTest, RecordStepsAreLogSpacedWithTheCheckpoints) {
  const std::vector<int> steps = DriftRecordSteps(65536);
  EXPECT_EQ(steps.front(), 1);
  EXPECT_EQ(steps.back(), 65536);
  for (int must : {64, 1024, 8192}) {
    EXPECT_NE(std::find(steps.begin(), steps.end(), must), steps.end()) << must;
  }
  EXPECT_GT(steps.size(), 250u);  // 24 per octave, duplicates merged at small steps
  EXPECT_LT(steps.size(), 500u);
}

TEST(StateDriftTest, ErrorsAreOrderedAndBounded) {
  for (DriftGating gating : {DriftGating::kMild, DriftGating::kQwen}) {
    const DriftConfig c = Short(gating);
    auto last = [&](const char* name) {
      const std::vector<DriftPoint> p = RunDriftChain(c, *ParseDriftVariant(name));
      EXPECT_EQ(p.back().step, c.steps);
      EXPECT_EQ(p.back().nonfinite, 0) << name;
      return p.back().o_rel_l2_window;
    };
    const double f32 = last("fp32"), bf16 = last("bf16"), int8 = last("int8-stochastic"),
                 fp8 = last("fp8-stochastic"), residual = last("int8+r4");
    EXPECT_LT(f32, 1e-5);
    EXPECT_LT(f32, bf16);
    EXPECT_LT(bf16, int8);
    EXPECT_LT(int8, fp8);
    EXPECT_LT(residual, int8);
    EXPECT_LT(int8, 0.1);
    EXPECT_LT(fp8, 0.4);
  }
}

TEST(StateDriftTest, RunsAreDeterministic) {
  const DriftConfig c = Short(DriftGating::kQwen);
  const DriftVariant v = *ParseDriftVariant("fp8-stochastic");
  const std::vector<DriftPoint> a = RunDriftChain(c, v), b = RunDriftChain(c, v);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].o_rel_l2, b[i].o_rel_l2);
  EXPECT_GT(DriftDecayMemory(c).longest_steps, 1.0);
}

}  // namespace
}  // namespace gdn::eval
