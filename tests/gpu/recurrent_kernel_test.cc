// The recurrent CUDA kernel family (kernels/cuda/recurrent_*) through the
// cuda backend, against the float64 oracle on fresh random inputs: a sample
// of the whole option grid, every block-shape variant, mixed 1..8 token
// decode, recurrent prefill lengths, extreme inputs, a 1000-step chain
// carried through the pool, and what the kernel must not touch.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/dtype_convert.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {

using testing::EntryPoint;
using testing::GateProfile;

// Every Prefill here runs the recurrent kernel: the backend's routing sends
// bf16 / fp16 sequences averaging >= 64 tokens to the chunked kernel
// (tested in chunked_prefill_test.cc, with its own bars).
class RecurrentKernelTest : public CudaBackendTest {
 protected:
  void SetUp() override {
    CudaBackendTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    static_cast<cuda::CudaBackend*>(backend_.get())
        ->set_prefill_kernel(cuda::PrefillKernel::kRecurrent);
  }
};

GdnOptions MakeOptions(int hqk, int hv, int k, int v, DType input, StateDType state,
                       GatingMode gating, bool l2) {
  GdnOptions o;
  o.shape.num_qk_heads = hqk;
  o.shape.num_v_heads = hv;
  o.shape.head_dim_k = k;
  o.shape.head_dim_v = v;
  o.input_dtype = input;
  o.state_dtype = state;
  o.gating = gating;
  o.l2_norm_qk = l2;
  return o;
}

std::vector<int> RandomLengths(std::mt19937_64& rng, int n, int max_len) {
  std::uniform_int_distribution<int> len(1, max_len);
  std::vector<int> lens(n);
  for (int& l : lens) l = len(rng);
  return lens;
}

// Every (K, V, input dtype, state dtype, gating, L2 norm) combination, each
// with a random GVA shape, batch and token mix.
TEST_F(RecurrentKernelTest, DecodeMatchesOracleOverOptionGrid) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937_64 rng(seed);
  const int dims[] = {64, 128};
  const DType inputs[] = {DType::kF32, DType::kBF16, DType::kF16};
  const StateDType states[] = {StateDType::kF32, StateDType::kBF16};
  const int batches[] = {1, 3, 7, 17};
  int cases = 0;
  for (int k : dims)
    for (int v : dims)
      for (DType in : inputs)
        for (StateDType st : states)
          for (GatingMode gm : {GatingMode::kDirect, GatingMode::kFused})
            for (bool l2 : {true, false}) {
              const int hqk = 1 + static_cast<int>(rng() % 3);
              const int group = 1 << (rng() % 3);
              GdnOptions options = MakeOptions(hqk, hqk * group, k, v, in, st, gm, l2);
              if (rng() % 4 == 0) options.scale = 0.3f;
              const int n = batches[rng() % 4];
              const std::vector<int> lens = RandomLengths(rng, n, kMaxDecodeTokens);
              const bool with_state = rng() % 4 != 0;
              const oracle::Inputs in_values =
                  testing::MakeRandomInputs(options, lens, rng(), with_state);
              ExpectMatchesOracle(options, in_values, EntryPoint::kDecode,
                                  absl::StrCat("case ", cases, " N=", n));
              ++cases;
            }
  EXPECT_EQ(cases, 96);
}

// The default server shape at a batch large enough for the large block
// shape, with every sequence bringing 1..8 tokens.
TEST_F(RecurrentKernelTest, DecodeMixedTokensLargeBatch) {
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    const GdnOptions options = MakeOptions(16, 32, 128, 128, DType::kBF16, st,
                                           GatingMode::kFused, true);
    const std::vector<int> lens = RandomLengths(rng, 160, kMaxDecodeTokens);
    ExpectMatchesOracle(options, testing::MakeRandomInputs(options, lens, rng(), true),
                        EntryPoint::kDecode, "mixed 1..8 tokens, N=160");
  }
}

// Only what kAuto picks per state dtype is compiled (issue 22): the wide
// shape for fp32 states only; forcing it with bf16 states is refused before
// any launch.
TEST_F(RecurrentKernelTest, WideIsCompiledForFp32StatesOnly) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(backend_.get());
  ASSERT_NE(cuda, nullptr);
  const GdnOptions options = MakeOptions(1, 2, 64, 64, DType::kBF16, StateDType::kBF16,
                                         GatingMode::kDirect, true);
  const oracle::Inputs inputs = testing::MakeRandomInputs(options, {1}, FreshSeed(), true);
  auto call = testing::StagedCall::Create(*backend_, options, inputs);
  ASSERT_TRUE(call.ok()) << call.status();
  const absl::Status s =
      cuda::LaunchRecurrent(options, cuda::MakeRecurrentParams(options, (*call)->params()),
                            cuda->stream(), cuda::RecurrentVariant::kWide);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  for (int code : {2, 5, 6, -1}) EXPECT_FALSE(cuda::IsRecurrentVariantCode(code)) << code;
  for (int code : {0, 1, 3, 4}) EXPECT_TRUE(cuda::IsRecurrentVariantCode(code)) << code;
}

// Each block-shape variant forced (with and without programmatic dependent
// launch), on one shape per state dtype, including zero-state sequences and
// copy-on-write pages; direct and fused gating (each variant stages the gates
// of its tokens itself).
TEST_F(RecurrentKernelTest, EveryVariantMatchesOracle) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(backend_.get());
  ASSERT_NE(cuda, nullptr);
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    for (auto variant : {cuda::RecurrentVariant::kSmall, cuda::RecurrentVariant::kWide,
                         cuda::RecurrentVariant::kPersistent}) {
      // kWide is compiled for fp32 states only (UncompiledVariantsAreInvalidArgument).
      if (variant == cuda::RecurrentVariant::kWide && st != StateDType::kF32) continue;
     for (bool pdl : {false, true}) {
     for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
      const uint64_t seed = FreshSeed();
      SCOPED_TRACE(absl::StrCat("seed ", seed, " variant ", cuda::RecurrentVariantName(variant),
                                " state ", StateDTypeName(st), pdl ? " pdl" : "",
                                gating == GatingMode::kFused ? " fused gating" : ""));
      std::mt19937_64 rng(seed);
      const GdnOptions options = MakeOptions(4, 8, 128, 128, DType::kBF16, st, gating, true);
      const std::vector<int> lens = RandomLengths(rng, 5, kMaxDecodeTokens);
      oracle::Inputs inputs = testing::MakeRandomInputs(options, lens, rng(), true);
      inputs.initial_states[2].clear();  // one zero-state sequence
      auto call = testing::StagedCall::Create(*backend_, options, inputs);
      ASSERT_TRUE(call.ok()) << call.status();
      ASSERT_TRUE(cuda::LaunchRecurrent(options,
                                        cuda::MakeRecurrentParams(options, (*call)->params()),
                                        cuda->stream(), variant, pdl)
                      .ok());
      ASSERT_TRUE(backend_->Synchronize().ok());
      auto got = (*call)->Fetch();
      ASSERT_TRUE(got.ok()) << got.status();
      const oracle::Outputs want = oracle::Run(options, inputs);
      const auto o_err = testing::Compare(got->o.data(), want.o.data(), want.o.size());
      EXPECT_LE(o_err.max_abs_rel, OutputTolerance(options)) << testing::ToString(o_err);
      for (size_t i = 0; i < want.final_states.size(); ++i) {
        const auto s_err = testing::Compare(got->final_states[i].data(),
                                            want.final_states[i].data(),
                                            want.final_states[i].size());
        EXPECT_LE(s_err.max_abs_rel, StateTolerance(options))
            << "state " << i << " " << testing::ToString(s_err);
      }
     }
     }
    }
  }
}

// Prefill through the recurrent kernel: lengths around the 8-token staging
// chunk and the 64-token prefill chunk, and a long one.
TEST_F(RecurrentKernelTest, RecurrentPrefillLengths) {
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    const GdnOptions options = MakeOptions(2, 4, 128, 128, DType::kBF16, st,
                                           GatingMode::kDirect, true);
    const std::vector<int> lens = {1, 63, 64, 65, 1000};
    ExpectMatchesOracle(options, testing::MakeRandomInputs(options, lens, rng(), true),
                        EntryPoint::kPrefill, "prefill 1/63/64/65/1000");
  }
}

// Prefix states (GdnParams::checkpoint_interval) through the recurrent
// kernel: every checkpoint page against the oracle's state after that
// prefix, with the final-state bars; fp32 / bf16 inputs and pages.
TEST_F(RecurrentKernelTest, PrefillCheckpoints) {
  for (DType in : {DType::kF32, DType::kBF16}) {
    for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
      for (int32_t interval : {64, 192}) {
        const GdnOptions options = MakeOptions(2, 4, 128, 64, in, st, GatingMode::kDirect, true);
        const uint64_t seed = FreshSeed();
        SCOPED_TRACE(absl::StrCat(DescribeOptions(options), " interval ", interval, " seed ", seed));
        const oracle::Inputs inputs =
            testing::MakeRandomInputs(options, {300, 64, 65, 1, 500}, seed, true);
        absl::StatusOr<testing::BackendOutputs> got =
            testing::RunOnBackend(*backend_, options, inputs, EntryPoint::kPrefill, interval);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(got->checkpoint_states[4].size(), static_cast<size_t>(499 / interval));
        absl::StatusOr<testing::ErrorStats> e = testing::CompareCheckpointStates(
            got->checkpoint_states, testing::OracleCheckpointStates(options, inputs, interval));
        ASSERT_TRUE(e.ok()) << e.status();
        EXPECT_EQ(e->nonfinite, 0);
        EXPECT_LE(e->max_abs_rel, StateTolerance(options)) << testing::ToString(*e);
      }
    }
  }
}

// Decode refuses more than kMaxDecodeTokens tokens per sequence.
TEST_F(RecurrentKernelTest, DecodeRejectsLongSequences) {
  const GdnOptions options = MakeOptions(1, 2, 64, 64, DType::kF32, StateDType::kF32,
                                         GatingMode::kDirect, true);
  const oracle::Inputs inputs =
      testing::MakeRandomInputs(options, {3, kMaxDecodeTokens + 1}, FreshSeed(), true);
  const auto got = testing::RunOnBackend(*backend_, options, inputs, EntryPoint::kDecode);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
}

// Seed 000's extreme inputs: saturated gates, no decay, beta 0 / 1, all-equal
// tokens, huge and tiny magnitudes. Never NaN; still the oracle's answer.
TEST_F(RecurrentKernelTest, ExtremeInputs) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937_64 rng(seed);
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    for (GatingMode gm : {GatingMode::kDirect, GatingMode::kFused}) {
      const GdnOptions options = MakeOptions(2, 4, 128, 64, DType::kBF16, st, gm, true);
      for (GateProfile profile : {GateProfile::kNoDecay, GateProfile::kStrongDecay,
                                  GateProfile::kBetaZero, GateProfile::kBetaOne}) {
        const std::vector<int> lens = {1, 8, 5, 40};
        ExpectMatchesOracle(options,
                            testing::MakeRandomInputs(options, lens, rng(), true, profile),
                            EntryPoint::kPrefill, testing::GateProfileName(profile));
      }
      // All-equal tokens: one token's q/k/v/gates repeated 64 times.
      oracle::Inputs same = testing::MakeRandomInputs(options, {64}, rng(), true);
      const LayerShape& s = options.shape;
      const size_t qk = s.num_qk_heads * s.head_dim_k, vv = s.num_v_heads * s.head_dim_v;
      for (int t = 1; t < 64; ++t) {
        std::copy_n(same.q.begin(), qk, same.q.begin() + t * qk);
        std::copy_n(same.k.begin(), qk, same.k.begin() + t * qk);
        std::copy_n(same.v.begin(), vv, same.v.begin() + t * vv);
        for (auto* gate : {&same.g, &same.beta, &same.a, &same.b}) {
          if (!gate->empty()) std::copy_n(gate->begin(), s.num_v_heads, gate->begin() + t * s.num_v_heads);
        }
      }
      ExpectMatchesOracle(options, same, EntryPoint::kPrefill, "all-equal tokens");
      // Huge and tiny magnitudes (q and k are normalised in the kernel; v
      // carries the magnitude into the state and o). Powers of two keep the
      // wire rounding exact.
      for (float magnitude : {65536.0f, 1.0f / 65536.0f}) {
        oracle::Inputs scaled = testing::MakeRandomInputs(options, {1, 8, 30}, rng(), true);
        for (float& x : scaled.q) x *= magnitude;
        for (float& x : scaled.k) x *= magnitude;
        for (float& x : scaled.v) x *= magnitude;
        for (auto& state : scaled.initial_states)
          for (float& x : state) x *= magnitude;
        ExpectMatchesOracle(options, scaled, EntryPoint::kPrefill,
                            absl::StrCat("magnitude ", magnitude));
      }
    }
  }
}

// Issue 21, defect 6: q/k rows whose fp32 sum of squares overflows (max|x|
// 1e20, 3e38: bf16 holds them) or underflows (1e-30) under the in-kernel L2
// norm (StageTokens, shared by every variant). Before the fix those heads'
// o came out 0 and k = 1e30 left the state unwritten.
TEST_F(RecurrentKernelTest, HugeAndTinyQkRowsUnderTheL2Norm) {
  auto* cuda = dynamic_cast<cuda::CudaBackend*>(backend_.get());
  ASSERT_NE(cuda, nullptr);
  const std::vector<float> q_max = {0, 1e20f, 3e38f, 1e-30f, 2e19f};
  const std::vector<float> k_max = {1e30f, 0, 1e-30f, 3e38f, 1e20f};
  for (DType in : {DType::kF32, DType::kBF16}) {
    for (int dim : {64, 128}) {
      const GdnOptions options =
          MakeOptions(2, 4, dim, dim, in, StateDType::kF32, GatingMode::kDirect, true);
      oracle::Inputs decode = testing::MakeRandomInputs(options, {1, 8, 3, 5}, FreshSeed(), true);
      testing::SetQkRowMagnitudes(options, q_max, k_max, &decode);
      ExpectMatchesOracle(options, decode, EntryPoint::kDecode, "extreme q/k, decode");
      oracle::Inputs prefill = testing::MakeRandomInputs(options, {40, 9}, FreshSeed(), true);
      testing::SetQkRowMagnitudes(options, q_max, k_max, &prefill);
      ExpectMatchesOracle(options, prefill, EntryPoint::kPrefill, "extreme q/k, prefill");
      // Every block-shape variant stages tokens the same way: each forced.
      const oracle::Outputs want = oracle::Run(options, decode);
      for (auto variant : {cuda::RecurrentVariant::kSmall, cuda::RecurrentVariant::kWide,
                           cuda::RecurrentVariant::kPersistent}) {
        if (variant == cuda::RecurrentVariant::kWide && options.state_dtype != StateDType::kF32) {
          continue;  // compiled for fp32 states only
        }
        SCOPED_TRACE(absl::StrCat(cuda::RecurrentVariantName(variant), " ",
                                  DescribeOptions(options)));
        auto call = testing::StagedCall::Create(*backend_, options, decode);
        ASSERT_TRUE(call.ok()) << call.status();
        ASSERT_TRUE(cuda::LaunchRecurrent(options,
                                          cuda::MakeRecurrentParams(options, (*call)->params()),
                                          cuda->stream(), variant, /*pdl=*/false)
                        .ok());
        ASSERT_TRUE(backend_->Synchronize().ok());
        auto got = (*call)->Fetch();
        ASSERT_TRUE(got.ok()) << got.status();
        const auto o_err = testing::Compare(got->o.data(), want.o.data(), want.o.size());
        EXPECT_EQ(o_err.nonfinite, 0);
        EXPECT_LE(o_err.max_abs_rel, OutputTolerance(options)) << testing::ToString(o_err);
        for (size_t i = 0; i < want.final_states.size(); ++i) {
          const auto s_err = testing::Compare(got->final_states[i].data(),
                                              want.final_states[i].data(),
                                              want.final_states[i].size());
          EXPECT_LE(s_err.max_abs_rel, StateTolerance(options))
              << "state " << i << " " << testing::ToString(s_err);
        }
      }
    }
  }
}

// g = 0 for 100k steps (no decay at all): the delta rule alone keeps the
// state bounded; the fp32 recurrence must stay close to float64 and finite.
TEST_F(RecurrentKernelTest, NoDecayHundredThousandSteps) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  const GdnOptions options = MakeOptions(1, 1, 64, 64, DType::kF32, StateDType::kF32,
                                         GatingMode::kDirect, true);
  const oracle::Inputs inputs =
      testing::MakeRandomInputs(options, {100000}, seed, true, GateProfile::kNoDecay);
  auto got = testing::RunOnBackend(*backend_, options, inputs, EntryPoint::kPrefill);
  ASSERT_TRUE(got.ok()) << got.status();
  const oracle::Outputs want = oracle::Run(options, inputs);
  const auto o_err = testing::Compare(got->o.data(), want.o.data(), want.o.size());
  EXPECT_EQ(o_err.nonfinite, 0);
  EXPECT_LE(o_err.rel_l2, 1e-3) << testing::ToString(o_err);
  const auto s_err = testing::Compare(got->final_states[0].data(),
                                      want.final_states[0].data(), want.final_states[0].size());
  EXPECT_LE(s_err.rel_l2, 1e-3) << testing::ToString(s_err);
}

// 1000 decode steps carried through the pool (in place for even sequences,
// ping-ponging copy-on-write pages for odd ones), the float64 oracle run over
// the whole sequence at once: the output error stays bounded along the chain.
TEST_F(RecurrentKernelTest, ThousandStepDecodeChainStaysBounded) {
  constexpr int kSteps = 1000;
  const std::vector<int> tokens_per_step = {1, 3, 1, 8};
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat("seed ", seed, " state ", StateDTypeName(st)));
    const GdnOptions options = MakeOptions(2, 4, 128, 128, DType::kBF16, st,
                                           GatingMode::kFused, true);
    const LayerShape& s = options.shape;
    const int n = static_cast<int>(tokens_per_step.size());
    std::vector<int> full_lens(n);
    for (int i = 0; i < n; ++i) full_lens[i] = tokens_per_step[i] * kSteps;
    const oracle::Inputs full = testing::MakeRandomInputs(options, full_lens, seed, true);
    const oracle::Outputs want = oracle::Run(options, full);

    // Step inputs: the step's slice of every sequence's tokens.
    auto slice = [&](int step) {
      oracle::Inputs in;
      in.cu_seqlens = {0};
      in.A_log = full.A_log;
      in.dt_bias = full.dt_bias;
      const size_t qk = s.num_qk_heads * s.head_dim_k, vv = s.num_v_heads * s.head_dim_v;
      for (int i = 0; i < n; ++i) {
        const int first = full.cu_seqlens[i] + step * tokens_per_step[i];
        for (int t = first; t < first + tokens_per_step[i]; ++t) {
          in.q.insert(in.q.end(), full.q.begin() + t * qk, full.q.begin() + (t + 1) * qk);
          in.k.insert(in.k.end(), full.k.begin() + t * qk, full.k.begin() + (t + 1) * qk);
          in.v.insert(in.v.end(), full.v.begin() + t * vv, full.v.begin() + (t + 1) * vv);
          for (auto [dst, src] : {std::pair{&in.a, &full.a}, std::pair{&in.b, &full.b}}) {
            dst->insert(dst->end(), src->begin() + t * s.num_v_heads,
                        src->begin() + (t + 1) * s.num_v_heads);
          }
        }
        in.cu_seqlens.push_back(in.cu_seqlens.back() + tokens_per_step[i]);
        in.initial_states.push_back(step == 0 ? full.initial_states[i] : std::vector<float>());
      }
      return in;
    };

    auto call = testing::StagedCall::Create(*backend_, options, slice(0));
    ASSERT_TRUE(call.ok()) << call.status();
    GdnParams& p = (*call)->params();
    const size_t esize = DTypeSize(options.input_dtype);
    std::vector<double> step_errors;
    for (int step = 0; step < kSteps; ++step) {
      if (step > 0) {
        const oracle::Inputs in = slice(step);
        std::vector<uint8_t> bytes;
        auto upload = [&](const void* dst, const std::vector<float>& values, bool convert) {
          bytes.resize(values.size() * (convert ? esize : 4));
          if (convert) {
            ConvertFromFloat(values.data(), values.size(), options.input_dtype, bytes.data());
          } else {
            std::memcpy(bytes.data(), values.data(), bytes.size());
          }
          return backend_->CopyToDevice(const_cast<void*>(dst), bytes.data(), bytes.size());
        };
        ASSERT_TRUE(upload(p.q, in.q, true).ok());
        ASSERT_TRUE(upload(p.k, in.k, true).ok());
        ASSERT_TRUE(upload(p.v, in.v, true).ok());
        ASSERT_TRUE(upload(p.a, in.a, false).ok());
        ASSERT_TRUE(upload(p.b, in.b, false).ok());
        // The state moves on: read what the last step wrote, write the other
        // page of the pair for copy-on-write sequences.
        std::vector<int32_t> initial = (*call)->final_pages(), final_pages = (*call)->final_pages();
        for (int i = 0; i < n; ++i) {
          if (i % 2 == 1) final_pages[i] = (*call)->initial_pages()[i];
        }
        ASSERT_TRUE((*call)->SetPages(initial, final_pages).ok());
        ASSERT_TRUE(backend_->Synchronize().ok());
      }
      ASSERT_TRUE((*call)->Run(EntryPoint::kDecode).ok());
      // Read o and pages directly: this test moves pages itself.
      auto got_o = ReadOutput(*backend_, options, p);
      ASSERT_TRUE(got_o.ok()) << got_o.status();
      // Compare this step's outputs with the oracle's rows for these tokens.
      const size_t vv = s.num_v_heads * s.head_dim_v;
      std::vector<double> ref;
      for (int i = 0; i < n; ++i) {
        const int first = full.cu_seqlens[i] + step * tokens_per_step[i];
        ref.insert(ref.end(), want.o.begin() + first * vv,
                   want.o.begin() + (first + tokens_per_step[i]) * vv);
      }
      const auto err = testing::Compare(got_o->data(), ref.data(), ref.size());
      ASSERT_EQ(err.nonfinite, 0) << "step " << step;
      step_errors.push_back(err.max_abs_rel);
      if (step == kSteps - 1) {
        for (int i = 0; i < n; ++i) {
          auto page = ReadPage(*backend_, options, p, (*call)->final_pages()[i]);
          ASSERT_TRUE(page.ok()) << page.status();
          const auto s_err = testing::Compare(page->data(), want.final_states[i].data(),
                                              want.final_states[i].size());
          EXPECT_LE(s_err.rel_l2, st == StateDType::kF32 ? 1e-4 : 2e-2)
              << "final state " << i << " " << testing::ToString(s_err);
        }
      }
    }
    const double worst = *std::max_element(step_errors.begin(), step_errors.end());
    double early = 0, late = 0;
    for (int i = 0; i < 100; ++i) early = std::max(early, step_errors[100 + i]);
    for (int i = kSteps - 100; i < kSteps; ++i) late = std::max(late, step_errors[i]);
    std::printf("[chain] state %s: max o error %.3g (steps 100-199 %.3g, last 100 %.3g)\n",
                std::string(StateDTypeName(st)).c_str(), worst, early, late);
    // fp32 state: only o's bf16 rounding; bf16 state: rounding once per step,
    // forgotten at the decay rate, so it must not grow along the chain.
    EXPECT_LE(worst, st == StateDType::kF32 ? OutputTolerance(options) : 4e-2);
    EXPECT_LE(late, 3 * early + 1e-3);
  }
}

// Pages that are no sequence's final page come back byte-identical; bad
// page ids write nothing and turn that sequence's o into NaN.
TEST_F(RecurrentKernelTest, WritesOnlyFinalPagesAndFlagsBadPageIds) {
  const GdnOptions options = MakeOptions(2, 4, 64, 128, DType::kBF16, StateDType::kF32,
                                         GatingMode::kDirect, true);
  const oracle::Inputs inputs =
      testing::MakeRandomInputs(options, {2, 1, 4}, FreshSeed(), true);
  auto call = testing::StagedCall::Create(*backend_, options, inputs);
  ASSERT_TRUE(call.ok()) << call.status();
  std::vector<int32_t> initial = (*call)->initial_pages(), final_pages = (*call)->final_pages();
  final_pages[1] = 1 << 20;  // out of the pool
  ASSERT_TRUE((*call)->SetPages(initial, final_pages).ok());
  ASSERT_TRUE((*call)->Run(EntryPoint::kDecode).ok());
  auto pool = (*call)->PoolBytes();
  ASSERT_TRUE(pool.ok());
  const auto& before = (*call)->staged_pool_bytes();
  const size_t page = (*call)->params().pool.page_bytes;
  ASSERT_EQ(pool->size(), before.size());
  for (size_t p = 0; p * page < before.size(); ++p) {
    if (static_cast<int32_t>(p) == final_pages[0] || static_cast<int32_t>(p) == final_pages[2]) {
      continue;
    }
    EXPECT_EQ(std::memcmp(pool->data() + p * page, before.data() + p * page, page), 0)
        << "page " << p << " changed";
  }
  // o straight from the device (Fetch would read the bad final page).
  const size_t vv = options.shape.num_v_heads * options.shape.head_dim_v;
  std::vector<uint16_t> o_bits(inputs.total_tokens() * vv);
  ASSERT_TRUE(backend_->CopyToHost(o_bits.data(), (*call)->params().o, o_bits.size() * 2).ok());
  ASSERT_TRUE(backend_->Synchronize().ok());
  // Tokens 0-1: sequence 0, token 2: sequence 1 (bad page), 3-6: sequence 2.
  for (size_t i = 0; i < o_bits.size(); ++i) {
    const bool bad = i >= 2 * vv && i < 3 * vv;
    EXPECT_EQ(std::isnan(Bf16ToFloat(o_bits[i])), bad) << "o element " << i;
  }
}

}  // namespace
}  // namespace gdn::gpu_test
