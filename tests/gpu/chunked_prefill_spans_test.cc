// v8's span path (ChunkedGeneration::kV8Spans, kernels/cuda/chunked/
// span_plan.h): one sequence cut into spans, their transitions (M, N) run
// in parallel, the start states fixed up, the spans run again from them.
// Against the float64 oracle within v7's bars (chunked_prefill_fixture.h):
// span counts from 2 to one chunk per span, zero and stored initial states,
// fp32, bf16, int8 and fp8 pages (both roundings), fused gating with GVA
// groups, no L2 norm, fp16
// inputs, no decay (M the full product of the token maps), strong decay,
// beta 1, all-equal tokens and huge / tiny q / k rows; the planned count on
// FlashQLA's few-heads shape; unusable page ids (o NaN, no page touched,
// the pool's other pages untouched); the calls it does not take. Compute
// capability 9.0 only (v8 is sm_90a): skipped elsewhere.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/chunked/span_plan.h"
#include "kernels/cuda/chunked_prefill.h"
#include "tests/gpu/chunked_prefill_fixture.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {

using cuda::ChunkedGeneration;

class ChunkedPrefillSpansTest : public ChunkedPrefillTest {
 protected:
  void SetUp() override {
    ChunkedPrefillTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (!DeviceIsSm90()) GTEST_SKIP() << "v8 runs on compute capability 9.0 only";
  }
  cuda::ChunkedPrefill& launcher() { return chunked_->launcher(); }
  // The following calls take the span path with `spans` spans (0: planned).
  void UseSpans(int spans) {
    launcher().set_generation(ChunkedGeneration::kV8Spans);
    launcher().set_v8_spans(spans);
  }
};

TEST_F(ChunkedPrefillSpansTest, SpanCountsAndStatesMatchTheOracle) {
  // 1000 tokens: 16 chunks, the last partial.
  for (int spans : {2, 3, 5, 16}) {
    for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
      for (bool from_pages : {true, false}) {
        SCOPED_TRACE(absl::StrCat(spans, " spans"));
        UseSpans(spans);
        GdnOptions options = Options(2, 4, 128, 128);
        options.state_dtype = st;
        ExpectPrefillMatches(options, {1000}, from_pages);
        EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8Spans);
        EXPECT_EQ(launcher().last_spans(), spans);
      }
    }
  }
  // Whole chunks only (no partial last chunk).
  UseSpans(3);
  ExpectPrefillMatches(Options(2, 4, 128, 128), {640}, true);
}

TEST_F(ChunkedPrefillSpansTest, GatingNormInputsAndProfiles) {
  UseSpans(4);
  GdnOptions grouped = Options(1, 4, 128, 128);
  grouped.gating = GatingMode::kFused;
  ExpectPrefillMatches(grouped, {1100}, true);
  GdnOptions raw = Options(2, 4, 128, 128);
  raw.l2_norm_qk = false;
  raw.state_dtype = StateDType::kBF16;
  ExpectPrefillMatches(raw, {1100}, true);
  GdnOptions half = Options(2, 4, 128, 128);
  half.input_dtype = DType::kF16;
  ExpectPrefillMatches(half, {1100}, true);
  for (testing::GateProfile profile :
       {testing::GateProfile::kNoDecay, testing::GateProfile::kStrongDecay,
        testing::GateProfile::kBetaOne}) {
    for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
      GdnOptions options = Options(2, 4, 128, 128);
      options.gating = gating;
      ExpectPrefillMatches(options, {1100}, true, profile);
    }
  }
  ExpectPrefillMatches(Options(2, 4, 128, 128), {1100}, true, testing::GateProfile::kRandom,
                       nullptr, /*equal_tokens=*/true);
  q_max_ = {0, 1e20f, 3e38f, 1e-30f};
  k_max_ = {3e38f, 0, 1e-30f, 1e20f};
  ExpectPrefillMatches(Options(2, 4, 128, 128), {1100}, true);
  q_max_.clear();
  k_max_.clear();
  EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8Spans);
}

// int8 / fp8 pages: Z_0 decoded from the initial page by the fixup, the
// final page encoded by the final copy (state_quant.h's codec and salt), both
// roundings and gatings; the bars add the pages' roundings
// (ChunkedStateTolerance).
TEST_F(ChunkedPrefillSpansTest, QuantizedPagesMatchTheOracle) {
  for (int spans : {3, 5}) {
    for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
      for (StateRounding r : {StateRounding::kNearest, StateRounding::kStochastic}) {
        SCOPED_TRACE(absl::StrCat(spans, " spans"));
        UseSpans(spans);
        GdnOptions options = Options(2, 4, 128, 128);
        options.state_dtype = st;
        options.state_rounding = r;
        options.gating = r == StateRounding::kStochastic ? GatingMode::kFused : GatingMode::kDirect;
        for (bool from_pages : {true, false}) {
          ExpectPrefillMatches(options, {1000}, from_pages);
          EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8Spans);
          EXPECT_EQ(launcher().last_spans(), spans);
        }
      }
    }
  }
}

// FlashQLA's 2/8 row, shortened: the planned count (9 spans on 132 SMs).
TEST_F(ChunkedPrefillSpansTest, PlannedSpansOnFewHeads) {
  UseSpans(0);
  ExpectPrefillMatches(Options(2, 8, 128, 128), {16384}, true);
  EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8Spans);
  EXPECT_EQ(launcher().last_spans(), cuda::chunked::PlanSpans(16384, 8, SmCount(), 0).spans());
  EXPECT_GE(launcher().last_spans(), 3);
}

// Unusable page ids: o all NaN, the final page (and every other page of
// the pool) untouched; then a good call on the same launcher still matches.
TEST_F(ChunkedPrefillSpansTest, UnusablePagesTouchNoPage) {
  UseSpans(3);
  const GdnOptions options = Options(2, 4, 128, 128);
  const oracle::Inputs inputs = testing::MakeRandomInputs(options, {700}, FreshSeed(), true);
  for (bool bad_initial : {true, false}) {
    SCOPED_TRACE(bad_initial ? "initial page out of the pool" : "final page out of the pool");
    auto call = testing::StagedCall::Create(*chunked_, options, inputs);
    ASSERT_TRUE(call.ok()) << call.status();
    std::vector<int32_t> initial = (*call)->initial_pages(), final = (*call)->final_pages();
    const int32_t out = (*call)->params().pool.num_pages;
    (bad_initial ? initial : final)[0] = out;
    ASSERT_TRUE((*call)->SetPages(initial, final).ok());
    ASSERT_TRUE((*call)->Run(testing::EntryPoint::kPrefill).ok());
    ExpectNanAndPoolUntouched(options, **call);
  }
  ExpectPrefillMatches(options, {700}, true);
}

// One chunk or less: nothing to cut, the unsplit v8 call. Two sequences:
// refused before any launch.
TEST_F(ChunkedPrefillSpansTest, CallsItDoesNotCut) {
  UseSpans(4);
  ExpectPrefillMatches(Options(2, 4, 128, 128), {64}, true);
  EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8);
  GdnParams two;
  two.num_seqs = 2;
  EXPECT_EQ(launcher().ResolveGeneration(Options(2, 4, 128, 128), two).status().code(),
            absl::StatusCode::kInvalidArgument);
  launcher().set_generation(ChunkedGeneration::kAuto);
  launcher().set_v8_spans(0);
}

}  // namespace
}  // namespace gdn::gpu_test
