// ChunkedPrefill's generation router (ChunkedGeneration, chunked_prefill.h):
// calls v8 (kernels/cuda/chunked/fused_chunk.h) can run go to v8 on a
// compute capability 9.0 device and match the float64 oracle within v7's
// bars (chunked_prefill_fixture.h), int8 / fp8 pages too (forced, both
// roundings and gatings); calls it refuses (K = 64, per-token states, v7's
// knobs) go to v7; long single sequences with checkpoints take the span
// path; the default threshold on
// sequences x value heads; the forced generations and their errors; long
// single sequences and huge / tiny q / k rows forced through v8 (and v7)
// against the oracle. On
// other devices every call must take v7 and forced v8 must fail cleanly.
#include <cuda_runtime_api.h>

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

// Params with only what ResolveGeneration reads (counts, checkpoint
// interval; null tensors count as aligned).
GdnParams PlanParams(int num_seqs, int checkpoint_interval = 0) {
  GdnParams params;
  params.num_seqs = num_seqs;
  params.checkpoint_interval = checkpoint_interval;
  return params;
}

class ChunkedPrefillRouteTest : public ChunkedPrefillTest {
 protected:
  void SetUp() override {
    ChunkedPrefillTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    sm90_ = DeviceIsSm90();
    std::printf("device %s compute capability 9.0; %d SMs\n", sm90_ ? "is" : "is not",
                SmCount());
  }
  cuda::ChunkedPrefill& launcher() { return chunked_->launcher(); }
  // The generation kAuto must pick for a call v8 can run with enough units.
  ChunkedGeneration SupportedPick() const {
    return sm90_ ? ChunkedGeneration::kV8 : ChunkedGeneration::kV7;
  }
  bool sm90_ = false;
};

// The brief's supported config: bf16 inputs, fp32 and bf16 pages, K = V =
// 128, a length-1 and a length-1000 sequence, initial states from pages and
// from the zero page; plus GVA groups, fused gating, no L2 norm and fp16
// inputs. The threshold is lowered to 1 unit so these small (fast oracle)
// shapes take the auto route to v8.
TEST_F(ChunkedPrefillRouteTest, AutoRouteTakesV8WhereSupportedAndMatchesTheOracle) {
  launcher().set_v8_min_units(1);
  const std::vector<int> lens = {1, 1000};
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    for (bool from_pages : {true, false}) {
      GdnOptions options = Options(2, 4, 128, 128);
      options.state_dtype = st;
      ExpectPrefillMatches(options, lens, from_pages);
      EXPECT_EQ(launcher().last_generation(), SupportedPick())
          << DescribeOptions(options) << " pages " << from_pages;
    }
  }
  GdnOptions grouped = Options(1, 4, 128, 128);
  grouped.gating = GatingMode::kFused;
  ExpectPrefillMatches(grouped, {1000, 1, 65}, true);
  EXPECT_EQ(launcher().last_generation(), SupportedPick());
  GdnOptions raw = Options(2, 4, 128, 128);
  raw.l2_norm_qk = false;
  raw.state_dtype = StateDType::kBF16;
  ExpectPrefillMatches(raw, lens, true);
  EXPECT_EQ(launcher().last_generation(), SupportedPick());
  GdnOptions half = Options(2, 4, 128, 128);
  half.input_dtype = DType::kF16;
  ExpectPrefillMatches(half, lens, false);
  EXPECT_EQ(launcher().last_generation(), SupportedPick());
  // All tokens equal: the case where U' = T'' W' cancels most (fused_chunk.h).
  ExpectPrefillMatches(Options(2, 4, 128, 128), {1000, 130, 64}, true,
                       testing::GateProfile::kRandom, nullptr, /*equal_tokens=*/true);
  EXPECT_EQ(launcher().last_generation(), SupportedPick());
}

// The cuda backend's own Prefill (CudaBackend::RoutePrefill -> ChunkedPrefill
// kAuto with the default threshold) on a shape with enough units for v8 on
// the H200 (4 x 32 = 128 >= 22): the server's path.
TEST_F(ChunkedPrefillRouteTest, BackendPrefillThroughTheRouter) {
  ExpectPrefillMatches(Options(4, 32, 128, 128), {300, 1, 257, 64}, true,
                       testing::GateProfile::kRandom, backend_.get());
}

// Calls v8 refuses run on v7 under kAuto, within v7's bars; forced kV8 is
// an error there, before any launch.
TEST_F(ChunkedPrefillRouteTest, RefusedCallsStayOnV7) {
  launcher().set_v8_min_units(1);
  for (auto [k, v] : {std::pair{64, 64}, {128, 64}, {64, 128}}) {
    ExpectPrefillMatches(Options(2, 4, k, v), {1, 1000}, true);
    EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV7) << k << " " << v;
  }
  // v7's knobs (a V tile, a kernel-2 form) mean v7.
  chunked_->Configure(32);
  ExpectPrefillMatches(Options(2, 4, 128, 128), {1, 1000}, true);
  EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV7);
  chunked_->Configure(0, cuda::ChunkedStatePass::kSplit);
  ExpectPrefillMatches(Options(2, 4, 128, 128), {1, 1000}, true);
  EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV7);
  chunked_->Configure(0);

  // Plans alone (no launch): a state after every token (kPerTokenStates:
  // v8 writes prefix states at chunk ends only), K = 64.
  struct Refused {
    GdnOptions options;
    GdnParams params;
  };
  const std::vector<Refused> refused = {{Options(2, 4, 128, 128), PlanParams(8, kPerTokenStates)},
                                        {Options(2, 4, 64, 128), PlanParams(8)}};
  for (const Refused& r : refused) {
    SCOPED_TRACE(absl::StrCat(DescribeOptions(r.options), " checkpoint_interval ",
                              r.params.checkpoint_interval));
    launcher().set_generation(ChunkedGeneration::kAuto);
    absl::StatusOr<ChunkedGeneration> pick = launcher().ResolveGeneration(r.options, r.params);
    ASSERT_TRUE(pick.ok()) << pick.status();
    EXPECT_EQ(*pick, ChunkedGeneration::kV7);
    launcher().set_generation(ChunkedGeneration::kV8);
    EXPECT_EQ(launcher().ResolveGeneration(r.options, r.params).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  launcher().set_generation(ChunkedGeneration::kAuto);
}

// The default threshold (set_v8_min_units(-1)): DefaultV8MinUnits(SM count)
// = SM count / 6 sequences x value heads, for calls the span path does not
// take (PlanParams carries no lengths). On the H200 (132 SMs, threshold 22):
// 2/8 x 1 sequence (8 units) and 2/4 x 2 stay on v7; 16/32 x 1 (32), x 4
// (128), x 8 (256), 16/64 x 8 (512) take v8.
TEST_F(ChunkedPrefillRouteTest, DefaultThresholdOnSequencesTimesHeads) {
  const int threshold = cuda::ChunkedPrefill::DefaultV8MinUnits(SmCount());
  EXPECT_EQ(cuda::ChunkedPrefill::DefaultV8MinUnits(132), 22);
  struct Row {
    int hqk, hv, seqs;
  };
  for (const Row row : {Row{16, 32, 1}, Row{2, 8, 1}, Row{16, 32, 4}, Row{16, 32, 8},
                        Row{16, 64, 8}, Row{2, 4, 2}}) {
    const int units = row.seqs * row.hv;
    const ChunkedGeneration want =
        units >= threshold ? SupportedPick() : ChunkedGeneration::kV7;
    absl::StatusOr<ChunkedGeneration> pick = launcher().ResolveGeneration(
        Options(row.hqk, row.hv, 128, 128), PlanParams(row.seqs));
    ASSERT_TRUE(pick.ok()) << pick.status();
    EXPECT_EQ(*pick, want) << row.hqk << "/" << row.hv << " x " << row.seqs << " sequences";
  }
  // A threshold set by hand moves the boundary.
  launcher().set_v8_min_units(1000);
  EXPECT_EQ(*launcher().ResolveGeneration(Options(16, 64, 128, 128), PlanParams(8)),
            ChunkedGeneration::kV7);
  launcher().set_v8_min_units(-1);
}

// kAuto cuts one sequence of kAutoSpansMinTokens or more into spans where
// the plan gives 3 or more (ChunkedPrefill::AutoSpans), on compute
// capability 9.0; shorter ones (2/8 x 4096, which the plan alone would cut),
// several sequences and heads too many for 3 spans in one wave stay unsplit.
TEST_F(ChunkedPrefillRouteTest, AutoRouteCutsLongSingleSequences) {
  struct Row {
    int hqk, hv, seqs, tokens;
  };
  for (const Row row : {Row{16, 32, 1, 32768}, Row{2, 8, 1, 32768}, Row{16, 32, 1, 2048},
                        Row{2, 8, 1, 4096}, Row{16, 64, 1, 32768}, Row{16, 32, 2, 32768}}) {
    std::vector<int32_t> cu(row.seqs + 1);
    for (int i = 0; i <= row.seqs; ++i) cu[i] = i * row.tokens;
    GdnParams params = PlanParams(row.seqs);
    params.cu_seqlens_host = cu.data();
    const GdnOptions options = Options(row.hqk, row.hv, 128, 128);
    const bool cut = row.seqs == 1 && row.tokens >= cuda::ChunkedPrefill::kAutoSpansMinTokens;
    const int spans =
        cut ? cuda::chunked::PlanSpans(row.tokens, row.hv, SmCount(), 0).spans() : 1;
    EXPECT_EQ(cuda::ChunkedPrefill::AutoSpans(options, params), spans);
    const int units = row.seqs * row.hv;
    ChunkedGeneration want = ChunkedGeneration::kV7;
    if (sm90_ && spans >= 3) {
      want = ChunkedGeneration::kV8Spans;
    } else if (units >= cuda::ChunkedPrefill::DefaultV8MinUnits(SmCount())) {
      want = SupportedPick();
    }
    absl::StatusOr<ChunkedGeneration> pick = launcher().ResolveGeneration(options, params);
    ASSERT_TRUE(pick.ok()) << pick.status();
    EXPECT_EQ(*pick, want) << row.hqk << "/" << row.hv << " " << row.seqs << " x " << row.tokens;
  }
  // FlashQLA's 2/8 row on 132 SMs: 9 spans, and 16/32's: 3.
  EXPECT_EQ(cuda::chunked::PlanSpans(32768, 8, 132, 0).spans(), 9);
  EXPECT_EQ(cuda::chunked::PlanSpans(32768, 32, 132, 0).spans(), 3);

  // Run through the router (the span count planned, not a forced one left
  // behind): against the oracle, with Qwen3-Next's gating too.
  if (!sm90_) return;
  launcher().set_v8_spans(2);  // ignored by kAuto
  GdnOptions fused = Options(2, 8, 128, 128);
  fused.gating = GatingMode::kFused;
  for (const GdnOptions& options : {Options(2, 8, 128, 128), fused}) {
    ExpectPrefillMatches(options, {8192}, true);
    EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8Spans);
    EXPECT_EQ(launcher().last_spans(), cuda::chunked::PlanSpans(8192, 8, SmCount(), 0).spans());
  }
  launcher().set_v8_spans(0);
}

// int8 / fp8 pages forced through v8 (fused_chunk_tiles.cuh: the pair scales
// by warp shuffles, the same codec as v7): the oracle within v7's bars plus
// the pages' roundings (ChunkedStateTolerance), both roundings and gatings,
// initial states from pages and the zero page. kAuto routes them as fp32
// pages (a long single sequence: the span path, whose final copy encodes
// them, span_fixup.h), with kept prefix states too (the server's interval of
// one chunk, or a client's of 4096 tokens: spans of whole intervals).
TEST_F(ChunkedPrefillRouteTest, QuantizedPagesThroughV8) {
  std::vector<int32_t> cu = {0, 32768};
  GdnParams long_one = PlanParams(1);
  long_one.cu_seqlens_host = cu.data();
  GdnOptions wide = Options(16, 32, 128, 128);
  wide.state_dtype = StateDType::kFP8;
  launcher().set_generation(ChunkedGeneration::kAuto);
  for (int interval : {0, 64, 4096}) {
    GdnParams params = long_one;
    params.checkpoint_interval = interval;
    absl::StatusOr<ChunkedGeneration> pick = launcher().ResolveGeneration(wide, params);
    ASSERT_TRUE(pick.ok()) << pick.status();
    EXPECT_EQ(*pick, sm90_ ? ChunkedGeneration::kV8Spans : ChunkedGeneration::kV7)
        << "16/32 x 32768, fp8 pages, checkpoint interval " << interval;
  }
  if (!sm90_) GTEST_SKIP() << "v8 runs on compute capability 9.0 only";

  launcher().set_generation(ChunkedGeneration::kV8);
  for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
    for (StateRounding r : {StateRounding::kNearest, StateRounding::kStochastic}) {
      for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
        GdnOptions options = Options(2, 4, 128, 128);
        options.state_dtype = st;
        options.state_rounding = r;
        options.gating = gating;
        for (bool from_pages : {true, false}) {
          ExpectPrefillMatches(options, {1, 63, 64, 65, 200, 333}, from_pages);
          EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8);
        }
      }
    }
  }
  launcher().set_generation(ChunkedGeneration::kAuto);
}

// Each generation forced on the same kind of call: both within v7's bars,
// last_generation says which ran. Forced v8 on a device other than 9.0 is
// FailedPrecondition; forced v8 with a V tile is InvalidArgument.
TEST_F(ChunkedPrefillRouteTest, ForcedGenerations) {
  const std::vector<int> lens = {1, 1000, 64};
  launcher().set_generation(ChunkedGeneration::kV7);
  ExpectPrefillMatches(Options(4, 32, 128, 128), lens, true);
  EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV7);
  launcher().set_generation(ChunkedGeneration::kV8);
  if (sm90_) {
    ExpectPrefillMatches(Options(4, 32, 128, 128), lens, true);
    EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8);
  } else {
    EXPECT_EQ(launcher().ResolveGeneration(Options(4, 32, 128, 128), PlanParams(3))
                  .status()
                  .code(),
              absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(launcher()
                .ResolveGeneration(Options(4, 32, 128, 128), PlanParams(3), /*v_tile=*/32)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  launcher().set_generation(ChunkedGeneration::kAuto);
}

// Long single sequences through forced v8, the case the default threshold
// keeps on v7 today (16/32 1 x 32768: 32 units): the chained states of 256
// chunks, from a page and with fused (Qwen3-Next) gating, within v7's bars,
// and v7 on the same shapes for the record (the threshold's evidence,
// chunked_prefill.h). 2/4 heads keep the float64 oracle short.
TEST_F(ChunkedPrefillRouteTest, ForcedV8OnLongSingleSequences) {
  if (!sm90_) GTEST_SKIP() << "v8 runs on compute capability 9.0 only";
  GdnOptions fused = Options(2, 4, 128, 128);
  fused.gating = GatingMode::kFused;
  for (const GdnOptions& options : {Options(2, 4, 128, 128), fused}) {
    for (const ChunkedGeneration generation : {ChunkedGeneration::kV8, ChunkedGeneration::kV7}) {
      launcher().set_generation(generation);
      const testing::ErrorStats err = ExpectPrefillMatches(options, {16384}, true);
      EXPECT_EQ(launcher().last_generation(), generation);
      std::printf("long sequence %s %s: o %s\n", DescribeOptions(options).c_str(),
                  generation == ChunkedGeneration::kV8 ? "v8" : "v7",
                  testing::ToString(err).c_str());
    }
  }
  launcher().set_generation(ChunkedGeneration::kAuto);
}

// q / k rows whose fp32 sum of squares overflows (max|x| 1e20, 3e38) or
// underflows (1e-30), as chunked_prefill_test's HugeAndTinyQkRowsUnderTheL2Norm
// (which runs v7), forced through v8: TPrep's rescaled rows are scaled in the
// fused kernel's tiles too (tprep_args.h `rescaled`,
// fused_chunk_tiles.cuh FixTileRows), within v7's bars, with direct and fused gating.
TEST_F(ChunkedPrefillRouteTest, ForcedV8OnHugeAndTinyQkRows) {
  if (!sm90_) GTEST_SKIP() << "v8 runs on compute capability 9.0 only";
  q_max_ = {0, 1e20f, 3e38f, 1e-30f, 2e19f};
  k_max_ = {1e30f, 0, 1e-30f, 3e38f, 1e20f};
  GdnOptions fused = Options(2, 4, 128, 128);
  fused.gating = GatingMode::kFused;
  launcher().set_generation(ChunkedGeneration::kV8);
  for (const GdnOptions& options : {Options(2, 4, 128, 128), fused}) {
    ExpectPrefillMatches(options, {130, 65, 1}, true);
    EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8);
  }
  launcher().set_generation(ChunkedGeneration::kAuto);
  q_max_.clear();
  k_max_.clear();
}

// The fused kernel's aux warpgroup (set_v8_aux_prep: T'', P and the gates in
// the kernel, no TPrep) forced through v8 on the cases above that reach it:
// varlen with GVA groups and fused gating, fp16, no L2 norm, bf16 pages, all
// tokens equal, huge / tiny q / k rows (the aux rescales and zeroes the rows
// itself), int8 / fp8 pages, and a long sequence through the span path.
TEST_F(ChunkedPrefillRouteTest, ForcedV8WithTheAuxWarpgroup) {
  if (!sm90_) GTEST_SKIP() << "v8 runs on compute capability 9.0 only";
  launcher().set_generation(ChunkedGeneration::kV8);
  launcher().set_v8_aux_prep(true);
  GdnOptions grouped = Options(1, 4, 128, 128);
  grouped.gating = GatingMode::kFused;
  ExpectPrefillMatches(grouped, {1000, 1, 65}, true);
  GdnOptions half = Options(2, 4, 128, 128);
  half.input_dtype = DType::kF16;
  ExpectPrefillMatches(half, {1, 1000}, false);
  GdnOptions raw = Options(2, 4, 128, 128);
  raw.l2_norm_qk = false;
  raw.state_dtype = StateDType::kBF16;
  ExpectPrefillMatches(raw, {1, 1000}, true);
  ExpectPrefillMatches(Options(2, 4, 128, 128), {1000, 130, 64}, true,
                       testing::GateProfile::kRandom, nullptr, /*equal_tokens=*/true);
  q_max_ = {0, 1e20f, 3e38f, 1e-30f, 2e19f};
  k_max_ = {1e30f, 0, 1e-30f, 3e38f, 1e20f};
  ExpectPrefillMatches(Options(2, 4, 128, 128), {130, 65, 1}, true);
  ExpectPrefillMatches(grouped, {130, 65, 1}, true);
  q_max_.clear();
  k_max_.clear();
  EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8);
  // int8 / fp8 pages (the quantized instances), then the span path (its
  // state-only phase 1 and its phase 3 without TPrep), Qwen3-Next's gating.
  for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
    GdnOptions options = grouped;
    options.state_dtype = st;
    ExpectPrefillMatches(options, {1, 65, 333}, true);
    EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8);
  }
  launcher().set_generation(ChunkedGeneration::kAuto);
  GdnOptions spans = Options(2, 8, 128, 128);
  spans.gating = GatingMode::kFused;
  ExpectPrefillMatches(spans, {8192}, true);
  EXPECT_EQ(launcher().last_generation(), ChunkedGeneration::kV8Spans);
  launcher().set_v8_aux_prep(false);
  launcher().set_generation(ChunkedGeneration::kAuto);
}

// One launcher alternating generations and shapes (the workspace is one
// grow-only buffer laid out per call): every call still matches.
TEST_F(ChunkedPrefillRouteTest, AlternatingGenerationsShareTheWorkspace) {
  launcher().set_v8_min_units(1);
  ExpectPrefillMatches(Options(2, 4, 128, 128), {1000, 1}, true);   // v8 (sm_90)
  ExpectPrefillMatches(Options(2, 4, 64, 64), {2000, 1}, true);     // v7, larger
  ExpectPrefillMatches(Options(2, 4, 128, 128), {3000, 65}, false);  // v8, larger still
  EXPECT_EQ(launcher().last_generation(), SupportedPick());
  ExpectPrefillMatches(Options(2, 4, 128, 128), {1, 1000}, true);   // v8, smaller
  launcher().set_generation(ChunkedGeneration::kV7);
  ExpectPrefillMatches(Options(2, 4, 128, 128), {1, 1000}, true);   // v7, same shape
  launcher().set_generation(ChunkedGeneration::kAuto);
}

}  // namespace
}  // namespace gdn::gpu_test
