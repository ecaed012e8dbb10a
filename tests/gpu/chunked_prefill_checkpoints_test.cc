// Prefix states of the chunked prefill (GdnParams::checkpoint_interval;
// kernels/cuda/chunked_prefill.h): v7's kernel-2 chain through the router
// (kAuto keeps v7 at these shapes; its V tiles and kernel-2 forms force it)
// and v8's fused kernel forced on compute capability 9.0 (checkpoints at
// whole chunks, every page dtype) and its span path (spans of whole
// intervals), against the float64 oracle's prefix states; a bad checkpoint
// page id touches no page in any of them.
//
// ChunkedOnlyBackend, the bars and the fixture: chunked_prefill_fixture.h.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/chunked_prefill.h"
#include "tests/gpu/chunked_prefill_fixture.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {

// Prefix states (GdnParams::checkpoint_interval) from v7's kernel-2 chain
// and from v8's fused kernel (forced, on compute capability 9.0; the cases
// without a V tile): every checkpoint page against the oracle's state after
// that prefix (the final-state bars), in both kernel-2 forms at every V tile,
// fp32, bf16, int8 and fp8 pages, bf16 and fp16 inputs, intervals of one to
// three chunks; o and the final states stay within their bars too.
TEST_F(ChunkedPrefillTest, PrefixStatesAtCheckpoints) {
  const std::vector<int> lens = {300, 64, 65, 1, 1000, 129};
  struct Case {
    DType input;
    StateDType state;
    int v_tile;
    cuda::ChunkedStatePass form;
    int interval;
  };
  constexpr cuda::ChunkedStatePass kSplit = cuda::ChunkedStatePass::kSplit;
  constexpr cuda::ChunkedStatePass kFused = cuda::ChunkedStatePass::kFused;
  constexpr cuda::ChunkedStatePass kAuto = cuda::ChunkedStatePass::kAuto;
  const std::vector<Case> cases = {
      {DType::kBF16, StateDType::kF32, 16, kSplit, 64},
      {DType::kBF16, StateDType::kF32, 32, kFused, 128},
      {DType::kBF16, StateDType::kBF16, 64, kFused, 64},
      {DType::kBF16, StateDType::kF32, 64, kSplit, 192},
      {DType::kF16, StateDType::kF32, 32, kFused, 64},
      {DType::kF16, StateDType::kBF16, 16, kSplit, 128},
      // v8 (no V tile): its checkpoint stores, quantized pages included.
      {DType::kBF16, StateDType::kF32, 0, kAuto, 64},
      {DType::kF16, StateDType::kBF16, 0, kAuto, 128},
      {DType::kBF16, StateDType::kInt8, 0, kAuto, 192},
      {DType::kBF16, StateDType::kFP8, 0, kAuto, 64},
  };
  const bool sm90 = DeviceIsSm90();
  for (const Case& c : cases) {
    const bool v8 = c.v_tile == 0;
    if (v8 && !sm90) continue;
    chunked_->launcher().set_generation(v8 ? cuda::ChunkedGeneration::kV8
                                           : cuda::ChunkedGeneration::kAuto);
    GdnOptions options = Options(2, 4, 128, 128);
    options.input_dtype = c.input;
    options.state_dtype = c.state;
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat(DescribeOptions(options), " v_tile ", c.v_tile, " kernel 2 form ",
                              static_cast<int>(c.form), " interval ", c.interval, " seed ", seed));
    chunked_->Configure(c.v_tile, c.form);
    const oracle::Inputs inputs = testing::MakeRandomInputs(options, lens, seed, true);
    absl::StatusOr<testing::BackendOutputs> got = testing::RunOnBackend(
        *chunked_, options, inputs, testing::EntryPoint::kPrefill, c.interval);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->checkpoint_states[4].size(), static_cast<size_t>(999 / c.interval));
    ExpectCheckpointsMatch(options, inputs, *got, c.interval);
    EXPECT_EQ(chunked_->launcher().last_generation(),
              v8 ? cuda::ChunkedGeneration::kV8 : cuda::ChunkedGeneration::kV7);
  }
  chunked_->Configure(0);
  chunked_->launcher().set_generation(cuda::ChunkedGeneration::kAuto);
}

// A checkpoint page id outside the pool: that sequence's o is NaN and none
// of its pages is touched (the chain runs on a NaN state, as for a bad
// final page); the other sequence and its checkpoints are unaffected.
TEST_F(ChunkedPrefillTest, BadCheckpointPageTouchesNoPage) {
  const GdnOptions options = Options(2, 4, 128, 128);
  const oracle::Inputs inputs = testing::MakeRandomInputs(options, {300, 200}, FreshSeed(), true);
  // v7 (kAuto at 8 units), then v8 forced on compute capability 9.0.
  std::vector<cuda::ChunkedGeneration> generations = {cuda::ChunkedGeneration::kAuto};
  if (DeviceIsSm90()) generations.push_back(cuda::ChunkedGeneration::kV8);
  for (const cuda::ChunkedGeneration generation : generations) {
    SCOPED_TRACE(absl::StrCat("generation ", static_cast<int>(generation)));
    chunked_->launcher().set_generation(generation);
    auto call = testing::StagedCall::Create(*chunked_, options, inputs, 64);
    ASSERT_TRUE(call.ok()) << call.status();
    std::vector<int32_t> slots = (*call)->checkpoint_pages();
    const int32_t lost = slots[5];  // sequence 1's second checkpoint page
    slots[5] = (*call)->params().pool.num_pages;
    ASSERT_TRUE((*call)->SetCheckpointPages(slots).ok());
    ASSERT_TRUE((*call)->Run(testing::EntryPoint::kPrefill).ok());
    absl::StatusOr<std::vector<float>> o = ReadOutput(*chunked_, options, (*call)->params());
    ASSERT_TRUE(o.ok()) << o.status();
    const size_t row = size_t{4} * 128;
    const auto first_nan = std::find_if(o->begin(), o->end(), [](float x) { return x != x; });
    EXPECT_EQ(first_nan - o->begin(), static_cast<std::ptrdiff_t>(300 * row))
        << "sequence 0's o";
    EXPECT_TRUE(std::all_of(o->begin() + 300 * row, o->end(), [](float x) { return x != x; }))
        << "sequence 1's o";
    absl::StatusOr<std::vector<uint8_t>> pool = (*call)->PoolBytes();
    ASSERT_TRUE(pool.ok());
    const std::vector<uint8_t>& staged = (*call)->staged_pool_bytes();
    const size_t page_bytes = static_cast<size_t>((*call)->params().pool.page_bytes);
    auto unchanged = [&](int32_t page) {
      return std::equal(pool->begin() + page * page_bytes,
                        pool->begin() + (page + 1) * page_bytes,
                        staged.begin() + page * page_bytes);
    };
    EXPECT_TRUE(unchanged((*call)->final_pages()[1])) << "sequence 1's final page";
    for (int32_t page : {slots[4], slots[6], lost}) {
      EXPECT_TRUE(unchanged(page)) << "page " << page;
    }
    for (int32_t m = 0; m < 4; ++m) {
      EXPECT_FALSE(unchanged(slots[m])) << "sequence 0, checkpoint " << m;
    }
  }
  chunked_->launcher().set_generation(cuda::ChunkedGeneration::kAuto);
}

// v8's span path with prefix states (forced, compute capability 9.0): spans
// of whole intervals (chunked::SpanUnitChunks); phase 3 stores each span's
// prefix states, its end included, into the real pool in its dtype. Every
// checkpoint page against the oracle's state after that prefix; o too.
TEST_F(ChunkedPrefillTest, SpanPathPrefixStates) {
  if (!DeviceIsSm90()) GTEST_SKIP() << "v8 runs on compute capability 9.0 only";
  struct Case {
    StateDType state;
    int spans;
    int interval;
    int tokens;
    int planned;  // spans planned: at most the units
  };
  const std::vector<Case> cases = {
      {StateDType::kF32, 3, 64, 1000, 3},  {StateDType::kBF16, 4, 192, 1500, 4},
      {StateDType::kInt8, 3, 128, 2000, 3}, {StateDType::kFP8, 5, 64, 1111, 5},
      // 1280 = 4 units of 320: the last one ends the sequence (no prefix
      // state there); 8 spans asked, 4 planned.
      {StateDType::kF32, 8, 320, 1280, 4},
  };
  for (const Case& c : cases) {
    chunked_->launcher().set_generation(cuda::ChunkedGeneration::kV8Spans);
    chunked_->launcher().set_v8_spans(c.spans);
    GdnOptions options = Options(2, 4, 128, 128);
    options.state_dtype = c.state;
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat(DescribeOptions(options), " ", c.spans, " spans, interval ",
                              c.interval, ", ", c.tokens, " tokens, seed ", seed));
    const oracle::Inputs inputs = testing::MakeRandomInputs(options, {c.tokens}, seed, true);
    absl::StatusOr<testing::BackendOutputs> got = testing::RunOnBackend(
        *chunked_, options, inputs, testing::EntryPoint::kPrefill, c.interval);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(chunked_->launcher().last_generation(), cuda::ChunkedGeneration::kV8Spans);
    EXPECT_EQ(chunked_->launcher().last_spans(), c.planned);
    EXPECT_EQ(got->checkpoint_states[0].size(), static_cast<size_t>((c.tokens - 1) / c.interval));
    ExpectCheckpointsMatch(options, inputs, *got, c.interval);
  }
  chunked_->launcher().set_generation(cuda::ChunkedGeneration::kAuto);
  chunked_->launcher().set_v8_spans(0);
}

// The span path with a checkpoint id outside the pool: o all NaN and no
// page of the pool touched (the fixup's check covers every slot, and phase
// 3 gets no slot to store into); then a good call where one slot is
// kZeroStatePage stores every other prefix state and skips that one.
TEST_F(ChunkedPrefillTest, SpanPathBadCheckpointPageTouchesNoPage) {
  if (!DeviceIsSm90()) GTEST_SKIP() << "v8 runs on compute capability 9.0 only";
  chunked_->launcher().set_generation(cuda::ChunkedGeneration::kV8Spans);
  chunked_->launcher().set_v8_spans(3);
  const GdnOptions options = Options(2, 4, 128, 128);
  const oracle::Inputs inputs = testing::MakeRandomInputs(options, {700}, FreshSeed(), true);
  for (const int bad_slot : {0, 5, 9}) {  // spans 0, 1 and 2 (700 tokens: 10 slots)
    SCOPED_TRACE(absl::StrCat("slot ", bad_slot, " out of the pool"));
    auto call = testing::StagedCall::Create(*chunked_, options, inputs, 64);
    ASSERT_TRUE(call.ok()) << call.status();
    std::vector<int32_t> slots = (*call)->checkpoint_pages();
    ASSERT_EQ(slots.size(), 10u);
    slots[bad_slot] = (*call)->params().pool.num_pages;
    ASSERT_TRUE((*call)->SetCheckpointPages(slots).ok());
    ASSERT_TRUE((*call)->Run(testing::EntryPoint::kPrefill).ok());
    EXPECT_EQ(chunked_->launcher().last_spans(), 3);
    ExpectNanAndPoolUntouched(options, **call);
  }
  auto call = testing::StagedCall::Create(*chunked_, options, inputs, 64);
  ASSERT_TRUE(call.ok()) << call.status();
  std::vector<int32_t> slots = (*call)->checkpoint_pages();
  const int32_t skipped = slots[4];
  slots[4] = kZeroStatePage;
  ASSERT_TRUE((*call)->SetCheckpointPages(slots).ok());
  ASSERT_TRUE((*call)->Run(testing::EntryPoint::kPrefill).ok());
  absl::StatusOr<std::vector<uint8_t>> pool = (*call)->PoolBytes();
  ASSERT_TRUE(pool.ok()) << pool.status();
  const std::vector<uint8_t>& staged = (*call)->staged_pool_bytes();
  const size_t page_bytes = static_cast<size_t>((*call)->params().pool.page_bytes);
  auto unchanged = [&](int32_t page) {
    return std::equal(pool->begin() + page * page_bytes, pool->begin() + (page + 1) * page_bytes,
                      staged.begin() + page * page_bytes);
  };
  EXPECT_TRUE(unchanged(skipped)) << "the skipped slot's page";
  for (size_t m = 0; m < slots.size(); ++m) {
    if (m != 4) {
      EXPECT_FALSE(unchanged(slots[m])) << "checkpoint " << m;
    }
  }
  EXPECT_FALSE(unchanged((*call)->final_pages()[0])) << "the final page";
  chunked_->launcher().set_generation(cuda::ChunkedGeneration::kAuto);
  chunked_->launcher().set_v8_spans(0);
}

}  // namespace
}  // namespace gdn::gpu_test
