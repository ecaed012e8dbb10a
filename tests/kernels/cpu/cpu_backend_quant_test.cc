// int8 / fp8 state pages on the cpu backend (issue 19): decode chains and
// prefills against the float64 oracle of the stored state's round trip
// (kernels/testing/quantized_chain.h), both roundings, both gatings, awkward
// shapes; prefix states; extreme inputs never give NaN.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/oracle/quantized_round_trip.h"
#include "kernels/state_page_codec.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "kernels/testing/quantized_chain.h"

namespace gdn {
namespace {

using testing::BackendOutputs;
using testing::ChainComparison;
using testing::EntryPoint;

GdnOptions Options(int hqk, int hv, int k, int v, StateDType st, StateRounding r,
                   GatingMode gating, DType in = DType::kBF16) {
  GdnOptions o;
  o.shape = {hqk, hv, k, v};
  o.input_dtype = in;
  o.state_dtype = st;
  o.state_rounding = r;
  o.gating = gating;
  return o;
}

// Bars against the round-trip oracle (kernels/testing/quantized_chain.h);
// these tests' activations are bf16.
double OBar(StateDType st) {
  GdnOptions o;
  o.input_dtype = DType::kBF16;
  o.state_dtype = st;
  return testing::ChainOBar(o);
}
double StateBar(StateDType st) { return testing::ChainStateBar(st); }

// Each step from the pages the backend read: o to the output's rounding and
// few roundings the other way (kernels/testing/quantized_chain.h). The
// chain's drift, in L2 with kChainMargin (testing/quantized_chain.h says why;
// its maxima are a rare rounding's after-effects: a bar on them failed about
// one fresh seed in 150 per case).
void ExpectChainMatches(const ChainComparison& c, StateDType st) {
  EXPECT_EQ(c.o.nonfinite, 0);
  EXPECT_LE(c.o.rel_l2, testing::kChainMargin * OBar(st)) << testing::ToString(c.o);
  EXPECT_LE(c.final_state.rel_l2, testing::kChainMargin * StateBar(st))
      << testing::ToString(c.final_state);
  EXPECT_EQ(c.step_o.nonfinite, 0);
  EXPECT_LE(c.step_o.max_abs_rel, testing::StepOBar(DType::kBF16)) << testing::ToString(c.step_o);
  EXPECT_LE(c.step_flip_fraction, testing::kStepFlipBar);
}

TEST(CpuBackendQuantTest, DecodeChainsFollowTheRoundTripOracle) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  struct Shape { int hqk, hv, k, v; };
  for (Shape s : {Shape{1, 2, 64, 64}, Shape{1, 3, 128, 64}, Shape{2, 2, 64, 128}}) {
    for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
      for (StateRounding r : {StateRounding::kNearest, StateRounding::kStochastic}) {
        for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
          const GdnOptions options = Options(s.hqk, s.hv, s.k, s.v, st, r, gating);
          SCOPED_TRACE(DescribeOptions(options));
          const oracle::Inputs in = testing::MakeRandomInputs(options, {24, 24, 24}, 7, true);
          absl::StatusOr<ChainComparison> c =
              testing::RunRoundTripChain(*backend, options, in, 1, EntryPoint::kDecode);
          ASSERT_TRUE(c.ok()) << c.status();
          ExpectChainMatches(*c, st);
        }
      }
    }
  }
}

// Several tokens per call (speculative verification) and one prefill call:
// one store per call.
TEST(CpuBackendQuantTest, MultiTokenCallsAndPrefill) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
    const GdnOptions options =
        Options(1, 2, 128, 128, st, StateRounding::kStochastic, GatingMode::kDirect);
    SCOPED_TRACE(DescribeOptions(options));
    const oracle::Inputs in = testing::MakeRandomInputs(options, {24, 24}, 8, true);
    absl::StatusOr<ChainComparison> c =
        testing::RunRoundTripChain(*backend, options, in, 8, EntryPoint::kDecode);
    ASSERT_TRUE(c.ok()) << c.status();
    ExpectChainMatches(*c, st);
    const oracle::Inputs long_in = testing::MakeRandomInputs(options, {200, 200}, 9, true);
    c = testing::RunRoundTripChain(*backend, options, long_in, 200, EntryPoint::kPrefill);
    ASSERT_TRUE(c.ok()) << c.status();
    ExpectChainMatches(*c, st);
  }
}

// The pages written are what the codec says: re-encoding the fetched values
// with the same salt gives the same bytes, and scales sit after the codes.
TEST(CpuBackendQuantTest, PagesHoldCodesAndScales) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  const GdnOptions options =
      Options(1, 2, 64, 64, StateDType::kInt8, StateRounding::kStochastic, GatingMode::kDirect);
  const oracle::Inputs in = testing::MakeRandomInputs(options, {1}, 10, true);
  auto call = testing::StagedCall::Create(*backend, options, in);
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_TRUE((*call)->Run(EntryPoint::kDecode).ok());
  absl::StatusOr<std::vector<uint8_t>> pool = (*call)->PoolBytes();
  ASSERT_TRUE(pool.ok());
  const size_t page_bytes = static_cast<size_t>((*call)->params().pool.page_bytes);
  const uint8_t* page = pool->data() + page_bytes * (*call)->final_pages()[0];
  const StatePageFormat f = StatePageFormat::For(options);
  std::vector<float> values = DecodeStatePage(f, page);
  std::vector<uint8_t> again(f.payload_bytes());
  EncodeStatePage(f, values.data(), oracle::StoreSalts(options, in, 0), again.data());
  size_t same = 0;
  for (size_t i = 0; i < again.size(); ++i) same += again[i] == page[i];
  // Codes of values already on the grid come back (scales to fp32 rounding).
  EXPECT_GE(same, again.size() * 99 / 100);
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 32; ++j) EXPECT_GT(StatePageScale(f, page, h, j), 0.0f);
}

TEST(CpuBackendQuantTest, PrefixAndPerTokenStates) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
    const GdnOptions options =
        Options(1, 2, 64, 64, st, StateRounding::kNearest, GatingMode::kDirect);
    const oracle::Inputs in = testing::MakeRandomInputs(options, {130, 64}, 11, true);
    absl::StatusOr<BackendOutputs> got =
        testing::RunOnBackend(*backend, options, in, EntryPoint::kPrefill, 64);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->checkpoint_states[0].size(), 2u);
    const auto want = testing::OracleCheckpointStates(options, in, 64);
    const StatePageFormat f = StatePageFormat::For(options);
    for (int m = 0; m < 2; ++m) {
      const std::vector<float> rt = oracle::QuantizedRoundTrip(
          f, want[0][m], oracle::StoreSalts(options, in, 64 * (m + 1) - 1));
      const std::vector<double> rt64(rt.begin(), rt.end());
      const testing::ErrorStats e =
          testing::Compare(got->checkpoint_states[0][m].data(), rt64.data(), rt64.size());
      EXPECT_LE(e.rel_l2, StateBar(st)) << testing::ToString(e);
    }
    // Per-token states of a 5-token draft.
    const oracle::Inputs draft = testing::MakeRandomInputs(options, {5}, 12, true);
    got = testing::RunOnBackend(*backend, options, draft, EntryPoint::kDecode, kPerTokenStates);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->checkpoint_states[0].size(), 4u);
    for (int j = 1; j <= 4; ++j) {
      const oracle::Outputs prefix =
          oracle::Run(options, testing::SliceSequence(options, draft, 0, 0, j,
                                                      draft.initial_states[0]));
      const std::vector<float> rt = oracle::QuantizedRoundTrip(
          f, prefix.final_states[0], oracle::StoreSalts(options, draft, j - 1));
      const std::vector<double> rt64(rt.begin(), rt.end());
      const testing::ErrorStats e =
          testing::Compare(got->checkpoint_states[0][j - 1].data(), rt64.data(), rt64.size());
      EXPECT_LE(e.rel_l2, StateBar(st)) << j << " " << testing::ToString(e);
    }
  }
}

// Finite extreme inputs never give NaN / Inf through int8 / fp8 pages:
// huge and tiny q / k rows, g = 0 with beta 1 for many steps, Qwen3-Next's
// strongest decays, all-equal tokens.
TEST(CpuBackendQuantTest, ExtremeInputsStayFinite) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  for (StateDType st : {StateDType::kInt8, StateDType::kFP8}) {
    for (testing::GateProfile profile :
         {testing::GateProfile::kNoDecay, testing::GateProfile::kStrongDecay,
          testing::GateProfile::kBetaOne, testing::GateProfile::kBetaZero}) {
      for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
        const GdnOptions options =
            Options(1, 2, 64, 64, st, StateRounding::kStochastic, gating, DType::kF32);
        SCOPED_TRACE(DescribeOptions(options) + " " + testing::GateProfileName(profile));
        oracle::Inputs in = testing::MakeRandomInputs(options, {40}, 13, true, profile);
        testing::SetQkRowMagnitudes(options, {0, 1e20f, 3e38f, 1e-30f}, {3e38f, 0, 1e-30f, 1e20f},
                                    &in);
        absl::StatusOr<ChainComparison> c =
            testing::RunRoundTripChain(*backend, options, in, 8, EntryPoint::kDecode);
        ASSERT_TRUE(c.ok()) << c.status();
        EXPECT_EQ(c->o.nonfinite, 0);
        EXPECT_EQ(c->final_state.nonfinite, 0);
        EXPECT_LE(c->o.rel_l2, 2 * OBar(st)) << testing::ToString(c->o);
      }
    }
  }
  // All-equal tokens: every row of q, k, v the same.
  const GdnOptions options =
      Options(1, 2, 64, 64, StateDType::kFP8, StateRounding::kNearest, GatingMode::kDirect);
  oracle::Inputs in = testing::MakeRandomInputs(options, {32}, 14, false);
  for (std::vector<float>* x : {&in.q, &in.k}) {
    for (size_t i = 64; i < x->size(); ++i) (*x)[i] = (*x)[i % 64];
  }
  for (size_t i = 128; i < in.v.size(); ++i) in.v[i] = in.v[i % 128];
  absl::StatusOr<ChainComparison> c =
      testing::RunRoundTripChain(*backend, options, in, 1, EntryPoint::kDecode);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->o.nonfinite, 0);
  ExpectChainMatches(*c, StateDType::kFP8);
}

}  // namespace
}  // namespace gdn
