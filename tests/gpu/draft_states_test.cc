// Per-token states (GdnParams::checkpoint_interval = kPerTokenStates: the
// states of a speculative draft) through the recurrent CUDA kernels: every
// block-shape variant, with and without programmatic dependent launch, both
// state dtypes, every token's state against the float64 oracle's state
// after that prefix; and o and the final pages bitwise those of the same
// call without per-token states (the draft path changes nothing else).
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/recurrent_params.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {

using testing::EntryPoint;

GdnOptions DraftOptions(DType input, StateDType state) {
  GdnOptions o;
  o.shape = {4, 8, 128, 128};
  o.input_dtype = input;
  o.state_dtype = state;
  o.gating = GatingMode::kDirect;
  o.l2_norm_qk = true;
  return o;
}

// Lengths 1..8 (a 1-token sequence has no per-token state: its final page
// holds it) in an order that mixes them.
const std::vector<int> kLens = {2, 8, 1, 5, 3, 7, 4, 6};

void ExpectTokenStatesMatch(const GdnOptions& options, const oracle::Inputs& inputs,
                            const testing::BackendOutputs& got) {
  ASSERT_EQ(got.checkpoint_states.size(), kLens.size());
  for (size_t i = 0; i < kLens.size(); ++i) {
    EXPECT_EQ(got.checkpoint_states[i].size(), static_cast<size_t>(kLens[i] - 1)) << i;
  }
  absl::StatusOr<testing::ErrorStats> e = testing::CompareCheckpointStates(
      got.checkpoint_states, testing::OracleCheckpointStates(options, inputs, kPerTokenStates));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->nonfinite, 0);
  EXPECT_LE(e->max_abs_rel, StateTolerance(options)) << testing::ToString(*e);
}

TEST_F(CudaBackendTest, DraftStatesEveryVariant) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(backend_.get());
  ASSERT_NE(cuda, nullptr);
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    for (auto variant : {cuda::RecurrentVariant::kSmall, cuda::RecurrentVariant::kWide,
                         cuda::RecurrentVariant::kPersistent}) {
      // kWide is compiled for fp32 states only (UncompiledVariantsAreInvalidArgument).
      if (variant == cuda::RecurrentVariant::kWide && st != StateDType::kF32) continue;
      for (bool pdl : {false, true}) {
        const uint64_t seed = FreshSeed();
        SCOPED_TRACE(absl::StrCat("seed ", seed, " variant ", cuda::RecurrentVariantName(variant),
                                  " state ", StateDTypeName(st), pdl ? " pdl" : ""));
        const GdnOptions options = DraftOptions(DType::kBF16, st);
        const oracle::Inputs inputs = testing::MakeRandomInputs(options, kLens, seed, true);
        auto call = testing::StagedCall::Create(*backend_, options, inputs, kPerTokenStates);
        ASSERT_TRUE(call.ok()) << call.status();
        ASSERT_TRUE(cuda::LaunchRecurrent(options,
                                          cuda::MakeRecurrentParams(options, (*call)->params()),
                                          cuda->stream(), variant, pdl)
                        .ok());
        ASSERT_TRUE(backend_->Synchronize().ok());
        absl::StatusOr<testing::BackendOutputs> got = (*call)->Fetch();
        ASSERT_TRUE(got.ok()) << got.status();
        ExpectTokenStatesMatch(options, inputs, *got);
        const oracle::Outputs want = oracle::Run(options, inputs);
        const testing::ErrorStats o_err =
            testing::Compare(got->o.data(), want.o.data(), want.o.size());
        EXPECT_LE(o_err.max_abs_rel, OutputTolerance(options)) << testing::ToString(o_err);
      }
    }
  }
}

// Through the backend's Decode (the variant it picks), fp32 and bf16 inputs:
// the same o and final pages, bit for bit, with and without the states.
TEST_F(CudaBackendTest, DraftStatesChangeNothingElse) {
  for (DType in : {DType::kF32, DType::kBF16}) {
    for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
      const uint64_t seed = FreshSeed();
      const GdnOptions options = DraftOptions(in, st);
      SCOPED_TRACE(absl::StrCat("seed ", seed, " ", DescribeOptions(options)));
      const oracle::Inputs inputs = testing::MakeRandomInputs(options, kLens, seed, true);
      absl::StatusOr<testing::BackendOutputs> plain =
          testing::RunOnBackend(*backend_, options, inputs, EntryPoint::kDecode);
      absl::StatusOr<testing::BackendOutputs> draft = testing::RunOnBackend(
          *backend_, options, inputs, EntryPoint::kDecode, kPerTokenStates);
      ASSERT_TRUE(plain.ok()) << plain.status();
      ASSERT_TRUE(draft.ok()) << draft.status();
      EXPECT_EQ(plain->o, draft->o);
      EXPECT_EQ(plain->final_states, draft->final_states);
      ExpectTokenStatesMatch(options, inputs, *draft);
    }
  }
}

}  // namespace
}  // namespace gdn::gpu_test
