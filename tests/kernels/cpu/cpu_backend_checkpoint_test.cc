// Prefix states (GdnParams::checkpoint_interval) on the cpu backend: every
// checkpoint page against the float64 oracle's state after that prefix,
// both state dtypes, varlen mixes, skipped slots, and bad checkpoint page
// ids that fail the call before any page is touched.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/recurrence_kernel.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn {
namespace {

using testing::BackendOutputs;
using testing::EntryPoint;
using ::testing::HasSubstr;

GdnOptions Options(StateDType st, GatingMode gating) {
  GdnOptions options;
  options.shape = {1, 2, 64, 64};
  options.input_dtype = DType::kF32;
  options.state_dtype = st;
  options.gating = gating;
  return options;
}

// Every sequence's checkpoint pages within `max_abs_rel` of the oracle.
void ExpectCheckpointsMatch(const GdnOptions& options, const oracle::Inputs& in,
                            const BackendOutputs& got, int32_t interval, double max_abs_rel) {
  absl::StatusOr<testing::ErrorStats> e = testing::CompareCheckpointStates(
      got.checkpoint_states, testing::OracleCheckpointStates(options, in, interval));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->nonfinite, 0);
  EXPECT_LE(e->max_abs_rel, max_abs_rel) << testing::ToString(*e);
}

TEST(CpuBackendCheckpointTest, PrefixStatesMatchTheOracle) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  const std::vector<int> lens = {300, 64, 65, 1, 129, 128};
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
      for (int32_t interval : {64, 128}) {
        const GdnOptions options = Options(st, gating);
        SCOPED_TRACE(DescribeOptions(options) + " interval " + std::to_string(interval));
        const oracle::Inputs in = testing::MakeRandomInputs(options, lens, 41 + interval, true);
        absl::StatusOr<BackendOutputs> got =
            testing::RunOnBackend(*backend, options, in, EntryPoint::kPrefill, interval);
        ASSERT_TRUE(got.ok()) << got.status();
        // 300 tokens: 4 (64) / 2 (128) checkpoints; 64: none (its state is the final one).
        EXPECT_EQ(got->checkpoint_states[0].size(), interval == 64 ? 4u : 2u);
        EXPECT_TRUE(got->checkpoint_states[1].empty());
        // bf16 pages: one rounding to 8 significant bits, up to 2^-8 of max|ref|.
        ExpectCheckpointsMatch(options, in, *got, interval,
                               st == StateDType::kF32 ? 1e-4 : 1e-4 + 0x1p-8);
      }
    }
  }
}

// A slot of kZeroStatePage writes nothing (the runner checks that every page
// not named as a final or checkpoint page keeps its staged bytes), the
// others still get their prefix state.
TEST(CpuBackendCheckpointTest, SkippedSlotsWriteNothing) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  const GdnOptions options = Options(StateDType::kF32, GatingMode::kDirect);
  const oracle::Inputs in = testing::MakeRandomInputs(options, {300, 200}, 43, true);
  auto call = testing::StagedCall::Create(*backend, options, in, 64);
  ASSERT_TRUE(call.ok()) << call.status();
  std::vector<int32_t> slots = (*call)->checkpoint_pages();
  ASSERT_EQ(slots.size(), 8u);  // 4 slots per sequence
  slots[1] = kZeroStatePage;
  slots[4] = kZeroStatePage;
  ASSERT_TRUE((*call)->SetCheckpointPages(slots).ok());
  ASSERT_TRUE((*call)->Run(EntryPoint::kPrefill).ok());
  absl::StatusOr<BackendOutputs> got = (*call)->Fetch();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->checkpoint_states[0][1].empty());
  EXPECT_TRUE(got->checkpoint_states[1][0].empty());
  EXPECT_FALSE(got->checkpoint_states[1][1].empty());
  ExpectCheckpointsMatch(options, in, *got, 64, 1e-4);  // the slots that were written
}

// A checkpoint page id outside the pool fails the call, naming the slot, with
// the pool and o untouched.
TEST(CpuBackendCheckpointTest, BadCheckpointPageFailsBeforeAnyWrite) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  const GdnOptions options = Options(StateDType::kF32, GatingMode::kDirect);
  const oracle::Inputs in = testing::MakeRandomInputs(options, {300, 200}, 44, true);
  auto call = testing::StagedCall::Create(*backend, options, in, 64);
  ASSERT_TRUE(call.ok()) << call.status();
  std::vector<int32_t> slots = (*call)->checkpoint_pages();
  slots[6] = (*call)->params().pool.num_pages;  // sequence 1's third checkpoint
  ASSERT_TRUE((*call)->SetCheckpointPages(slots).ok());
  const absl::Status st = (*call)->Run(EntryPoint::kPrefill);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("checkpoint_pages[6]"));
  absl::StatusOr<std::vector<uint8_t>> pool = (*call)->PoolBytes();
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(*pool, (*call)->staged_pool_bytes());
}

// Per-token states (kPerTokenStates: speculative drafts): the state after
// every token but the last of each 1..8-token decode sequence, against the
// oracle; o and the final pages bit for bit those of the same call without
// them; both builds of the kernel (AVX2 and generic) and state dtypes.
TEST(CpuBackendCheckpointTest, PerTokenStatesOfDecodeSequences) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  // One sequence alone: its heads are split by columns over the threads.
  for (const std::vector<int>& lens : {std::vector<int>{2, 8, 1, 5, 3, 7, 4, 6}, {7}}) {
    for (bool avx2 : {true, false}) {
      cpu::AllowAvx2ForTesting(avx2);
      for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
        const GdnOptions options = Options(st, GatingMode::kDirect);
        SCOPED_TRACE(DescribeOptions(options) + (avx2 ? " avx2 " : " generic ") +
                     std::to_string(lens.size()) + " sequences");
        const oracle::Inputs in = testing::MakeRandomInputs(options, lens, 45, true);
        absl::StatusOr<BackendOutputs> plain =
            testing::RunOnBackend(*backend, options, in, EntryPoint::kDecode);
        absl::StatusOr<BackendOutputs> got =
            testing::RunOnBackend(*backend, options, in, EntryPoint::kDecode, kPerTokenStates);
        ASSERT_TRUE(plain.ok()) << plain.status();
        ASSERT_TRUE(got.ok()) << got.status();
        for (size_t i = 0; i < lens.size(); ++i) {
          EXPECT_EQ(got->checkpoint_states[i].size(), static_cast<size_t>(lens[i] - 1));
        }
        ExpectCheckpointsMatch(options, in, *got, kPerTokenStates,
                               st == StateDType::kF32 ? 1e-4 : 1e-4 + 0x1p-8);
        EXPECT_EQ(plain->o, got->o);
        EXPECT_EQ(plain->final_states, got->final_states);
      }
    }
  }
  cpu::AllowAvx2ForTesting(true);
}

// Per-token states only for decode-sized sequences.
TEST(CpuBackendCheckpointTest, PerTokenStatesRefuseLongSequences) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  const GdnOptions options = Options(StateDType::kF32, GatingMode::kDirect);
  const oracle::Inputs in = testing::MakeRandomInputs(options, {3, 9}, 46, true);
  absl::StatusOr<BackendOutputs> got =
      testing::RunOnBackend(*backend, options, in, EntryPoint::kPrefill, kPerTokenStates);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("per-token states"));
}

}  // namespace
}  // namespace gdn
