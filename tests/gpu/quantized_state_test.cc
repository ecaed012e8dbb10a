// int8 / fp8 state pages on the device (issue 19): the recurrent kernel's
// decode chains and every compiled variant against the float64 oracle of the
// stored state's round trip (kernels/testing/quantized_chain.h, the same
// bars as the cpu backend's cpu_backend_quant_test), awkward sizes, both
// gatings and roundings; pages agreeing with the cpu backend's byte for
// byte but for rare roundings; the chunked prefill reading and writing the
// pages; finite extreme inputs never giving NaN; a long chain's error
// bounded against the unrounded recurrence.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/oracle/quantized_round_trip.h"
#include "kernels/testing/quantized_chain.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {

using testing::BackendOutputs;
using testing::ChainComparison;
using testing::EntryPoint;

GdnOptions Options(int hqk, int hv, int k, int v, DType in, StateDType st, StateRounding r,
                   GatingMode gating) {
  GdnOptions o;
  o.shape = {hqk, hv, k, v};
  o.input_dtype = in;
  o.state_dtype = st;
  o.state_rounding = r;
  o.gating = gating;
  return o;
}

// Each step from the pages the device read: o to the output's rounding and
// few roundings the other way (kernels/testing/quantized_chain.h). The
// chain's drift, in L2 with kChainMargin (testing/quantized_chain.h says why;
// its maxima are a rare rounding's after-effects: a bar on them failed the cpu
// backend about one fresh seed in 150 per case).
void ExpectChainMatches(const ChainComparison& c, const GdnOptions& o) {
  EXPECT_EQ(c.o.nonfinite, 0);
  EXPECT_EQ(c.final_state.nonfinite, 0);
  EXPECT_LE(c.o.rel_l2, testing::kChainMargin * testing::ChainOBar(o)) << testing::ToString(c.o);
  EXPECT_LE(c.final_state.rel_l2, testing::kChainMargin * testing::ChainStateBar(o.state_dtype))
      << testing::ToString(c.final_state);
  EXPECT_EQ(c.step_o.nonfinite, 0);
  EXPECT_LE(c.step_o.max_abs_rel, testing::StepOBar(o.input_dtype)) << testing::ToString(c.step_o);
  EXPECT_LE(c.step_flip_fraction, testing::kStepFlipBar);
}

class QuantizedStateTest : public CudaBackendTest {
 protected:
  cuda::CudaBackend* cuda() { return static_cast<cuda::CudaBackend*>(backend_.get()); }

  // `inputs` staged (states every `interval` tokens when > 0), run by the
  // recurrent kernel's `variant`, and fetched back.
  absl::StatusOr<BackendOutputs> RunRecurrent(const GdnOptions& options,
                                              const oracle::Inputs& inputs,
                                              cuda::RecurrentVariant variant, bool pdl,
                                              int32_t interval = 0) {
    auto call = testing::StagedCall::Create(*backend_, options, inputs, interval);
    if (!call.ok()) return call.status();
    if (absl::Status s = cuda::LaunchRecurrent(
            options, cuda::MakeRecurrentParams(options, (*call)->params()), cuda()->stream(),
            variant, pdl);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = backend_->Synchronize(); !s.ok()) return s;
    return (*call)->Fetch();
  }
};

// Decode chains of one token per call over awkward batch sizes, shapes,
// both dtypes, roundings and gatings, bf16 and fp32 activations.
TEST_F(QuantizedStateTest, DecodeChainsFollowTheRoundTripOracle) {
  cuda()->set_prefill_kernel(cuda::PrefillKernel::kRecurrent);
  for (const testing::ChainCase& c : testing::DecodeChainCases()) {
    for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
      for (StateRounding r : {StateRounding::kNearest, StateRounding::kStochastic}) {
        for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
          const GdnOptions options = testing::ChainCaseOptions(c, st, r, gating);
          const uint64_t seed = FreshSeed();
          SCOPED_TRACE(absl::StrCat("seed ", seed, " batch ", c.batch, " ",
                                    DescribeOptions(options)));
          const oracle::Inputs inputs = testing::MakeRandomInputs(
              options, std::vector<int>(c.batch, testing::kDecodeChainTokens), seed, true);
          absl::StatusOr<ChainComparison> got =
              testing::RunRoundTripChain(*backend_, options, inputs, 1, EntryPoint::kDecode);
          ASSERT_TRUE(got.ok()) << got.status();
          ExpectChainMatches(*got, options);
        }
      }
    }
  }
}

// Every compiled variant (small, persistent; with and without PDL)
// on one call of mixed 1..8-token sequences, enough items that the
// persistent grids stride; one zero-state sequence.
TEST_F(QuantizedStateTest, EveryCompiledVariant) {
  for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
    for (auto variant : {cuda::RecurrentVariant::kSmall, cuda::RecurrentVariant::kPersistent}) {
      for (bool pdl : {false, true}) {
        const uint64_t seed = FreshSeed();
        SCOPED_TRACE(absl::StrCat("seed ", seed, " ", cuda::RecurrentVariantName(variant),
                                  pdl ? "+pdl " : " ", StateDTypeName(st)));
        std::mt19937_64 rng(seed);
        const GdnOptions options = Options(4, 8, 128, 128, DType::kBF16, st,
                                           StateRounding::kStochastic, GatingMode::kDirect);
        std::vector<int> lens(79);
        for (int& l : lens) l = 1 + static_cast<int>(rng() % kMaxDecodeTokens);
        oracle::Inputs inputs = testing::MakeRandomInputs(options, lens, rng(), true);
        inputs.initial_states[2].clear();
        absl::StatusOr<BackendOutputs> got = RunRecurrent(options, inputs, variant, pdl);
        ASSERT_TRUE(got.ok()) << got.status();
        const oracle::Outputs want = oracle::Run(options, inputs);
        const auto o_err = testing::Compare(got->o.data(), want.o.data(), want.o.size());
        EXPECT_EQ(o_err.nonfinite, 0);
        EXPECT_LE(o_err.rel_l2, testing::ChainOBar(options)) << testing::ToString(o_err);
        const StatePageFormat format = StatePageFormat::For(options);
        for (size_t i = 0; i < lens.size(); ++i) {
          const std::vector<float> rt = oracle::QuantizedRoundTrip(
              format, want.final_states[i],
              oracle::StoreSalts(options, inputs, inputs.cu_seqlens[i + 1] - 1));
          const std::vector<double> rt64(rt.begin(), rt.end());
          const auto s_err =
              testing::Compare(got->final_states[i].data(), rt64.data(), rt64.size());
          EXPECT_LE(s_err.rel_l2, testing::ChainStateBar(st))
              << "state " << i << " " << testing::ToString(s_err);
        }
      }
    }
  }
}

// Prefix states (interval 64: sequences of several token chunks) and
// per-token states (kPerTokenStates: drafts of at most 8 tokens) written by
// the recurrent kernel's int8 / fp8 store, both compiled variants: every
// state within one rounding of the oracle's (the bars of the chunked test
// below), o within the decode bar.
TEST_F(QuantizedStateTest, RecurrentKernelWritesPrefixAndTokenStates) {
  for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
    for (auto variant : {cuda::RecurrentVariant::kSmall, cuda::RecurrentVariant::kPersistent}) {
      for (int32_t interval : {kCheckpointTokens, kPerTokenStates}) {
        const uint64_t seed = FreshSeed();
        SCOPED_TRACE(absl::StrCat("seed ", seed, " ", cuda::RecurrentVariantName(variant), " ",
                                  StateDTypeName(st), " interval ", interval));
        const GdnOptions options = Options(2, 4, 128, 128, DType::kBF16, st,
                                           StateRounding::kStochastic, GatingMode::kFused);
        const std::vector<int> lens = interval == kPerTokenStates
                                          ? std::vector<int>{2, 8, 1, 5, 3}
                                          : std::vector<int>{1, 63, 64, 65, 200};
        const oracle::Inputs inputs = testing::MakeRandomInputs(options, lens, seed, true);
        absl::StatusOr<BackendOutputs> got =
            RunRecurrent(options, inputs, variant, /*pdl=*/false, interval);
        ASSERT_TRUE(got.ok()) << got.status();
        const oracle::Outputs want = oracle::Run(options, inputs);
        const auto o_err = testing::Compare(got->o.data(), want.o.data(), want.o.size());
        EXPECT_EQ(o_err.nonfinite, 0);
        EXPECT_LE(o_err.rel_l2, 6e-3) << testing::ToString(o_err);
        const double bar = st == StateDType::kInt8 ? 1.5e-2 : 5e-2;
        for (size_t i = 0; i < want.final_states.size(); ++i) {
          const auto s_err = testing::Compare(got->final_states[i].data(),
                                              want.final_states[i].data(),
                                              want.final_states[i].size());
          EXPECT_EQ(s_err.nonfinite, 0);
          EXPECT_LE(s_err.rel_l2, bar) << "state " << i << " " << testing::ToString(s_err);
        }
        absl::StatusOr<testing::ErrorStats> cp = testing::CompareCheckpointStates(
            got->checkpoint_states, testing::OracleCheckpointStates(options, inputs, interval));
        ASSERT_TRUE(cp.ok()) << cp.status();
        EXPECT_EQ(cp->nonfinite, 0);
        EXPECT_LE(cp->rel_l2, bar) << testing::ToString(*cp);
      }
    }
  }
}

TEST_F(QuantizedStateTest, UncompiledCombinationsAreInvalidArgument) {
  GdnOptions options = Options(1, 2, 64, 64, DType::kBF16, StateDType::kInt8,
                               StateRounding::kNearest, GatingMode::kDirect);
  const oracle::Inputs inputs = testing::MakeRandomInputs(options, {1}, 1, true);
  auto call = testing::StagedCall::Create(*backend_, options, inputs);
  ASSERT_TRUE(call.ok()) << call.status();
  for (auto variant : {cuda::RecurrentVariant::kWide}) {
    const absl::Status s = cuda::LaunchRecurrent(
        options, cuda::MakeRecurrentParams(options, (*call)->params()), cuda()->stream(), variant);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  options.input_dtype = DType::kF16;
  EXPECT_EQ(backend_->Supports(options).code(), absl::StatusCode::kInvalidArgument);
}

// The device and the cpu backend write the same bytes for the same call
// (same codec, same random bits), but where their fp32 sums round a value to
// the other side of a boundary.
TEST_F(QuantizedStateTest, PagesAgreeWithTheCpuBackend) {
  std::unique_ptr<Backend> cpu = CreateCpuBackend(2);
  for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
    for (StateRounding r : {StateRounding::kNearest, StateRounding::kStochastic}) {
      const GdnOptions options = Options(2, 4, 128, 128, DType::kF32, st, r, GatingMode::kFused);
      const oracle::Inputs inputs = testing::MakeRandomInputs(options, {1, 3, 8}, 21, true);
      absl::StatusOr<BackendOutputs> g = testing::RunOnBackend(*backend_, options, inputs,
                                                               EntryPoint::kDecode);
      absl::StatusOr<BackendOutputs> c = testing::RunOnBackend(*cpu, options, inputs,
                                                               EntryPoint::kDecode);
      ASSERT_TRUE(g.ok() && c.ok());
      size_t same = 0, total = 0;
      for (size_t i = 0; i < 3; ++i) {
        for (size_t e = 0; e < g->final_states[i].size(); ++e) {
          same += std::fabs(g->final_states[i][e] - c->final_states[i][e]) <=
                  1e-6f * std::fabs(c->final_states[i][e]);
          ++total;
        }
      }
      EXPECT_GE(same, total * 99 / 100) << StateDTypeName(st) << "/" << StateRoundingName(r);
    }
  }
}

// The chunked prefill reads the initial page and writes the final and
// prefix pages in int8 / fp8: o within the chunked kernel's bars, states
// within them plus one quantisation of the state.
TEST_F(QuantizedStateTest, ChunkedPrefillReadsAndWritesPages) {
  cuda()->set_prefill_kernel(cuda::PrefillKernel::kChunked);
  for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
    for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
      for (auto [k, v] : {std::pair{128, 128}, {64, 128}, {128, 64}}) {
        const GdnOptions options = Options(2, 4, k, v, DType::kBF16, st,
                                           StateRounding::kStochastic, gating);
        const uint64_t seed = FreshSeed();
        SCOPED_TRACE(absl::StrCat("seed ", seed, " ", DescribeOptions(options)));
        const oracle::Inputs inputs =
            testing::MakeRandomInputs(options, {1, 63, 64, 65, 200, 333}, seed, true);
        absl::StatusOr<BackendOutputs> got =
            testing::RunOnBackend(*backend_, options, inputs, EntryPoint::kPrefill, 64);
        ASSERT_TRUE(got.ok()) << got.status();
        const oracle::Outputs want = oracle::Run(options, inputs);
        const auto o_err = testing::Compare(got->o.data(), want.o.data(), want.o.size());
        EXPECT_EQ(o_err.nonfinite, 0);
        EXPECT_LE(o_err.rel_l2, 6e-3) << testing::ToString(o_err);
        EXPECT_LE(o_err.max_abs_rel, 1e-2) << testing::ToString(o_err);
        // One rounding of a state: int8 ~1/127 of a group's max, fp8 ~2^-4
        // of each element, on top of the kernel's bf16 operands.
        const double bar = st == StateDType::kInt8 ? 1.5e-2 : 5e-2;
        for (size_t i = 0; i < want.final_states.size(); ++i) {
          const auto s_err = testing::Compare(got->final_states[i].data(),
                                              want.final_states[i].data(),
                                              want.final_states[i].size());
          EXPECT_EQ(s_err.nonfinite, 0);
          EXPECT_LE(s_err.rel_l2, bar) << "state " << i << " " << testing::ToString(s_err);
        }
        absl::StatusOr<testing::ErrorStats> cp = testing::CompareCheckpointStates(
            got->checkpoint_states, testing::OracleCheckpointStates(options, inputs, 64));
        ASSERT_TRUE(cp.ok()) << cp.status();
        EXPECT_EQ(cp->nonfinite, 0);
        EXPECT_LE(cp->rel_l2, bar) << testing::ToString(*cp);
      }
    }
  }
}

// Finite extreme inputs: huge / tiny q and k rows, no decay, strongest
// decay, beta 0 / 1, through decode and both prefill kernels: never NaN.
TEST_F(QuantizedStateTest, ExtremeInputsStayFinite) {
  for (auto kernel : {cuda::PrefillKernel::kRecurrent, cuda::PrefillKernel::kChunked}) {
    cuda()->set_prefill_kernel(kernel);
    for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
      for (testing::GateProfile profile :
           {testing::GateProfile::kNoDecay, testing::GateProfile::kStrongDecay,
            testing::GateProfile::kBetaOne, testing::GateProfile::kBetaZero}) {
        for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
          const GdnOptions options = Options(1, 2, 128, 128, DType::kBF16, st,
                                             StateRounding::kStochastic, gating);
          SCOPED_TRACE(DescribeOptions(options) + " " + testing::GateProfileName(profile));
          oracle::Inputs in = testing::MakeRandomInputs(options, {130, 7}, 31, true, profile);
          testing::SetQkRowMagnitudes(options, {0, 1e20f, 3e38f, 1e-30f},
                                      {3e38f, 0, 1e-30f, 1e20f}, &in);
          for (EntryPoint entry : {EntryPoint::kPrefill, EntryPoint::kDecode}) {
            const oracle::Inputs call =
                entry == EntryPoint::kDecode
                    ? testing::ConcatSequences({testing::SliceSequence(options, in, 1, 0, 7,
                                                                       in.initial_states[1])})
                    : in;
            absl::StatusOr<BackendOutputs> got =
                testing::RunOnBackend(*backend_, options, call, entry);
            ASSERT_TRUE(got.ok()) << got.status();
            for (float x : got->o) ASSERT_TRUE(std::isfinite(x));
            for (const auto& s : got->final_states) {
              for (float x : s) ASSERT_TRUE(std::isfinite(x));
            }
          }
        }
      }
    }
  }
}

// 2000 decode steps through the pages, Qwen3-Next gating: the error against
// the unrounded float64 recurrence stays at the level of one state's
// rounding over its decay memory (bench/eval/state_drift.h measures it to
// 64k steps on the cpu).
TEST_F(QuantizedStateTest, LongChainStaysBounded) {
  for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
    const GdnOptions options = Options(1, 2, 128, 128, DType::kF32, st,
                                       StateRounding::kStochastic, GatingMode::kFused);
    const oracle::Inputs inputs = testing::MakeRandomInputs(options, {2000}, 41, false);
    absl::StatusOr<ChainComparison> got =
        testing::RunRoundTripChain(*backend_, options, inputs, 8, EntryPoint::kDecode);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->o.nonfinite, 0);
    EXPECT_LE(got->o_vs_exact.rel_l2, st == StateDType::kInt8 ? 0.05 : 0.2)
        << testing::ToString(got->o_vs_exact);
    EXPECT_LE(got->o.rel_l2, 4 * testing::ChainOBar(options)) << testing::ToString(got->o);
  }
}

}  // namespace
}  // namespace gdn::gpu_test
