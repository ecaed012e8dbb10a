#include "kernels/gdn_types.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;

TEST(GdnTypesTest, ElementSizes) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(StateDTypeSize(StateDType::kF32), 4u);
  EXPECT_EQ(StateDTypeSize(StateDType::kBF16), 2u);
  EXPECT_EQ(StateDTypeSize(StateDType::kInt8), 1u);
  EXPECT_EQ(StateDTypeSize(StateDType::kFP8), 1u);
  EXPECT_FALSE(IsQuantizedState(StateDType::kBF16));
  EXPECT_TRUE(IsQuantizedState(StateDType::kFP8));
}

TEST(GdnTypesTest, NamesRoundTripThroughParse) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) {
    DType parsed = d == DType::kF32 ? DType::kBF16 : DType::kF32;
    ASSERT_TRUE(ParseDType(DTypeName(d), &parsed)) << DTypeName(d);
    EXPECT_EQ(parsed, d);
  }
  for (StateDType d : {StateDType::kF32, StateDType::kBF16, StateDType::kInt8, StateDType::kFP8}) {
    StateDType parsed = d == StateDType::kF32 ? StateDType::kBF16 : StateDType::kF32;
    ASSERT_TRUE(ParseStateDType(StateDTypeName(d), &parsed));
    EXPECT_EQ(parsed, d);
  }
  for (StateRounding r : {StateRounding::kNearest, StateRounding::kStochastic}) {
    StateRounding parsed =
        r == StateRounding::kNearest ? StateRounding::kStochastic : StateRounding::kNearest;
    ASSERT_TRUE(ParseStateRounding(StateRoundingName(r), &parsed));
    EXPECT_EQ(parsed, r);
  }
  StateRounding rounding;
  EXPECT_FALSE(ParseStateRounding("truncate", &rounding));
  for (GatingMode m : {GatingMode::kDirect, GatingMode::kFused}) {
    GatingMode parsed =
        m == GatingMode::kDirect ? GatingMode::kFused : GatingMode::kDirect;
    ASSERT_TRUE(ParseGatingMode(GatingModeName(m), &parsed));
    EXPECT_EQ(parsed, m);
  }
  DType d;
  StateDType s;
  GatingMode g;
  EXPECT_FALSE(ParseDType("float32", &d));
  EXPECT_FALSE(ParseStateDType("fp16", &s));  // not a state dtype
  EXPECT_FALSE(ParseGatingMode("", &g));
}

TEST(GdnTypesTest, DefaultsAreQwen3NextTp1) {
  const GdnOptions options;
  EXPECT_EQ(options.shape.num_qk_heads, 16);
  EXPECT_EQ(options.shape.num_v_heads, 32);
  EXPECT_EQ(options.shape.group_size(), 2);
  EXPECT_TRUE(ValidateOptions(options).ok());
}

TEST(GdnTypesTest, EffectiveScaleDefaultsToInverseSqrtK) {
  GdnOptions options;
  options.shape.head_dim_k = 64;
  EXPECT_FLOAT_EQ(options.effective_scale(), 0.125f);
  options.shape.head_dim_k = 128;
  EXPECT_FLOAT_EQ(options.effective_scale(), 1.0f / std::sqrt(128.0f));
  options.scale = 0.3f;
  EXPECT_FLOAT_EQ(options.effective_scale(), 0.3f);
}

// int8 / fp8: codes, then one fp32 scale per (head, kStateScaleCols columns).
TEST(GdnTypesTest, QuantizedPageLayoutHoldsScalesAfterTheCodes) {
  for (int hv : {1, 3, 32}) {
    for (int k : {64, 128}) {
      for (int v : {64, 128}) {
        for (StateDType d : {StateDType::kInt8, StateDType::kFP8}) {
          const StatePageLayout layout = StatePageLayout::For({1, hv, k, v}, d);
          EXPECT_EQ(layout.state_bytes, size_t(hv) * k * v);
          EXPECT_EQ(layout.scales_bytes, size_t(hv) * v / kStateScaleCols * 4);
          EXPECT_EQ(layout.page_bytes % 256, 0u);
          EXPECT_GE(layout.page_bytes, layout.state_bytes + layout.scales_bytes);
          EXPECT_LT(layout.page_bytes, layout.state_bytes + layout.scales_bytes + 256);
        }
      }
    }
  }
  GdnOptions options;
  options.state_dtype = StateDType::kInt8;
  EXPECT_NE(DescribeOptions(options).find("state=int8/nearest"), std::string::npos);
  options.state_rounding = static_cast<StateRounding>(7);
  EXPECT_FALSE(ValidateOptions(options).ok());
  options.state_rounding = StateRounding::kNearest;
  options.state_dtype = static_cast<StateDType>(9);
  EXPECT_FALSE(ValidateOptions(options).ok());
}

TEST(GdnTypesTest, PageLayoutIsStateBytesRoundedTo256) {
  for (int hv : {1, 3, 32}) {
    for (int k : {64, 128}) {
      for (int v : {64, 128}) {
        for (StateDType d : {StateDType::kF32, StateDType::kBF16}) {
          const LayerShape shape{1, hv, k, v};
          const StatePageLayout layout = StatePageLayout::For(shape, d);
          EXPECT_EQ(layout.state_bytes,
                    size_t(hv) * k * v * StateDTypeSize(d));
          EXPECT_EQ(layout.scales_bytes, 0u);
          EXPECT_EQ(layout.page_bytes % 256, 0u);
          EXPECT_GE(layout.page_bytes, layout.state_bytes);
          EXPECT_LT(layout.page_bytes, layout.state_bytes + 256);
        }
      }
    }
  }
  // The default shape: 32 x 128 x 128 x 4 B = 2 MiB.
  EXPECT_EQ(StatePageLayout::For(LayerShape{}, StateDType::kF32).page_bytes,
            2u << 20);
}

TEST(GdnTypesTest, ValidateOptionsNamesTheBadField) {
  struct Case {
    void (*mutate)(GdnOptions*);
    const char* field;
  };
  const Case cases[] = {
      {[](GdnOptions* o) { o->shape.num_qk_heads = 0; }, "num_qk_heads"},
      {[](GdnOptions* o) { o->shape.num_v_heads = 24; o->shape.num_qk_heads = 16; },
       "num_v_heads"},
      {[](GdnOptions* o) { o->shape.num_v_heads = 0; }, "num_v_heads"},
      {[](GdnOptions* o) { o->shape.head_dim_k = 96; }, "head_dim_k"},
      {[](GdnOptions* o) { o->shape.head_dim_v = 256; }, "head_dim_v"},
      {[](GdnOptions* o) { o->scale = -1.0f; }, "scale"},
      {[](GdnOptions* o) { o->scale = std::nanf(""); }, "scale"},
  };
  for (const Case& c : cases) {
    GdnOptions options;
    c.mutate(&options);
    const absl::Status st = ValidateOptions(options);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(st.message(), HasSubstr(c.field));
  }
}

TEST(GdnTypesTest, DescribeOptionsMentionsEveryField) {
  GdnOptions options;
  options.shape = {4, 8, 64, 128};
  options.input_dtype = DType::kF16;
  options.state_dtype = StateDType::kBF16;
  options.gating = GatingMode::kFused;
  options.l2_norm_qk = false;
  const std::string text = DescribeOptions(options);
  for (const char* part : {"Hqk=4", "Hv=8", "K=64", "V=128", "input=fp16",
                           "state=bf16", "gating=fused", "l2norm=off"}) {
    EXPECT_THAT(text, HasSubstr(part));
  }
}

}  // namespace
}  // namespace gdn
