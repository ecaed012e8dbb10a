// The cpu backend against itself and the oracle across call boundaries:
// token-by-token Decode vs one Prefill, a varlen batch vs its sequences
// alone, a state carried over three calls, thread-count independence,
// extreme inputs, and bad params that must fail before touching the pool.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/dtype_convert.h"
#include "kernels/oracle/gdn_oracle.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn {
namespace {

using testing::BackendOutputs;
using testing::Compare;
using testing::ConcatSequences;
using testing::EntryPoint;
using testing::ErrorStats;
using testing::GateProfile;
using testing::MakeRandomInputs;
using testing::SliceSequence;
using ::testing::HasSubstr;

GdnOptions Options(int hqk, int hv, int k, int v, DType in, StateDType st,
                   GatingMode gating = GatingMode::kDirect) {
  GdnOptions options;
  options.shape = {hqk, hv, k, v};
  options.input_dtype = in;
  options.state_dtype = st;
  options.gating = gating;
  return options;
}

BackendOutputs MustRun(Backend& backend, const GdnOptions& options,
                       const oracle::Inputs& inputs, EntryPoint entry) {
  absl::StatusOr<BackendOutputs> out =
      testing::RunOnBackend(backend, options, inputs, entry);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : BackendOutputs{};
}

// got vs ref within a relative bound, no NaN / Inf.
void ExpectClose(const std::vector<float>& got, const std::vector<double>& ref,
                 double max_abs_rel, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const ErrorStats e = Compare(got.data(), ref.data(), ref.size());
  EXPECT_EQ(e.nonfinite, 0) << what;
  EXPECT_LE(e.max_abs_rel, max_abs_rel) << what << ": " << testing::ToString(e);
}
void ExpectClose(const std::vector<float>& got, const std::vector<float>& ref,
                 double max_abs_rel, const std::string& what) {
  ExpectClose(got, std::vector<double>(ref.begin(), ref.end()), max_abs_rel, what);
}

void ExpectMatchesOracle(const GdnOptions& options, const oracle::Inputs& in,
                         const BackendOutputs& got, double o_tol,
                         double state_tol) {
  const oracle::Outputs ref = oracle::Run(options, in);
  ExpectClose(got.o, ref.o, o_tol, "o");
  ASSERT_EQ(got.final_states.size(), ref.final_states.size());
  for (size_t i = 0; i < ref.final_states.size(); ++i) {
    ExpectClose(got.final_states[i], ref.final_states[i], state_tol,
                "final state " + std::to_string(i));
  }
}

// Row range [t0, t1) of a [T, Hv, V] output.
std::vector<float> Rows(const std::vector<float>& o, const GdnOptions& options,
                        int64_t t0, int64_t t1) {
  const int64_t width = int64_t{options.shape.num_v_heads} * options.shape.head_dim_v;
  return std::vector<float>(o.begin() + t0 * width, o.begin() + t1 * width);
}

// fp32 state: identical arithmetic whatever the call boundaries, up to
// nothing (1e-6 leaves room for a compiler reassociating).
constexpr double kSameArithmetic = 1e-6;

TEST(CpuBackendConsistencyTest, TokenByTokenDecodeEqualsOnePrefill) {
  const GdnOptions options = Options(2, 4, 128, 64, DType::kBF16,
                                     StateDType::kF32, GatingMode::kFused);
  const std::vector<int> lens = {5, 1, 12, 8};
  const oracle::Inputs in = MakeRandomInputs(options, lens, 11, true);
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  const BackendOutputs prefill = MustRun(*backend, options, in, EntryPoint::kPrefill);

  // Decode step s carries token s of every sequence still running.
  std::vector<std::vector<float>> states = in.initial_states;
  std::vector<std::vector<float>> o_rows(lens.size());
  for (int step = 0; step < 12; ++step) {
    std::vector<oracle::Inputs> parts;
    std::vector<int> seqs;
    for (size_t i = 0; i < lens.size(); ++i) {
      if (step >= lens[i]) continue;
      parts.push_back(SliceSequence(options, in, i, step, step + 1, states[i]));
      seqs.push_back(i);
    }
    const BackendOutputs out = MustRun(*backend, options, ConcatSequences(parts),
                                       EntryPoint::kDecode);
    ASSERT_EQ(out.final_states.size(), seqs.size());
    for (size_t j = 0; j < seqs.size(); ++j) {
      states[seqs[j]] = out.final_states[j];
      const std::vector<float> row = Rows(out.o, options, j, j + 1);
      o_rows[seqs[j]].insert(o_rows[seqs[j]].end(), row.begin(), row.end());
    }
  }
  for (size_t i = 0; i < lens.size(); ++i) {
    const std::string seq = "sequence " + std::to_string(i);
    ExpectClose(o_rows[i],
                Rows(prefill.o, options, in.cu_seqlens[i], in.cu_seqlens[i + 1]),
                kSameArithmetic, seq + " o");
    ExpectClose(states[i], prefill.final_states[i], kSameArithmetic,
                seq + " state");
  }
}

TEST(CpuBackendConsistencyTest, Bf16StateRoundsOncePerCall) {
  // Three decode calls of 1..8 tokens over a bf16 state. Each call must be
  // the fp32 recurrence from the stored (bf16) state with one rounding at the
  // end: o matches the oracle started from the backend's stored state to
  // fp32 precision (rounding the state per token would be ~2^-9 off), and the
  // stored state is the oracle's final state to bf16 precision.
  const GdnOptions options = Options(1, 2, 64, 128, DType::kF32, StateDType::kBF16);
  const oracle::Inputs in = MakeRandomInputs(options, {13}, 12, true);
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  std::vector<float> state = in.initial_states[0];
  for (auto [begin, end] : {std::pair{0, 3}, {3, 11}, {11, 13}}) {
    const oracle::Inputs call = SliceSequence(options, in, 0, begin, end, state);
    const BackendOutputs out = MustRun(*backend, options, call, EntryPoint::kDecode);
    const oracle::Outputs ref = oracle::Run(options, call);
    const std::string what = "tokens " + std::to_string(begin) + ".." + std::to_string(end);
    ExpectClose(out.o, ref.o, 1e-4, what + " o");
    ExpectClose(out.final_states[0], ref.final_states[0], 4e-3, what + " state");
    state = out.final_states[0];
  }
}

TEST(CpuBackendConsistencyTest, VarlenBatchEqualsSequencesAlone) {
  const GdnOptions options = Options(2, 4, 64, 64, DType::kF16, StateDType::kF32);
  const std::vector<int> lens = {37, 1, 100, 8, 16, 17};
  const oracle::Inputs in = MakeRandomInputs(options, lens, 13, true);
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  const BackendOutputs batch = MustRun(*backend, options, in, EntryPoint::kPrefill);
  for (size_t i = 0; i < lens.size(); ++i) {
    const BackendOutputs alone = MustRun(
        *backend, options,
        SliceSequence(options, in, i, 0, lens[i], in.initial_states[i]),
        EntryPoint::kPrefill);
    // The same work items in another batch: bit for bit the same.
    EXPECT_EQ(alone.o, Rows(batch.o, options, in.cu_seqlens[i], in.cu_seqlens[i + 1]))
        << "sequence " << i;
    EXPECT_EQ(alone.final_states[0], batch.final_states[i]) << "sequence " << i;
  }
  ExpectMatchesOracle(options, in, batch, 6e-4, 1e-4);
}

TEST(CpuBackendConsistencyTest, StateCarriedOverThreeCallsEqualsOneCall) {
  const GdnOptions options = Options(1, 2, 128, 128, DType::kF32, StateDType::kF32);
  const oracle::Inputs in = MakeRandomInputs(options, {200}, 14, true);
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  const BackendOutputs whole = MustRun(*backend, options, in, EntryPoint::kPrefill);
  ExpectMatchesOracle(options, in, whole, 1e-4, 1e-4);

  std::vector<float> state = in.initial_states[0];
  std::vector<float> o;
  const std::pair<int, int> calls[] = {{0, 70}, {70, 71}, {71, 200}};
  for (auto [begin, end] : calls) {
    const BackendOutputs part = MustRun(
        *backend, options, SliceSequence(options, in, 0, begin, end, state),
        end - begin == 1 ? EntryPoint::kDecode : EntryPoint::kPrefill);
    state = part.final_states[0];
    o.insert(o.end(), part.o.begin(), part.o.end());
  }
  ExpectClose(o, whole.o, kSameArithmetic, "o");
  ExpectClose(state, whole.final_states[0], kSameArithmetic, "final state");
}

TEST(CpuBackendConsistencyTest, DecodeWithOneToEightTokensPerSequence) {
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    const GdnOptions options = Options(4, 8, 128, 128, DType::kBF16, st);
    const oracle::Inputs in =
        MakeRandomInputs(options, {1, 2, 3, 4, 5, 6, 7, 8}, 15, true);
    std::unique_ptr<Backend> backend = CreateCpuBackend(2);
    ExpectMatchesOracle(options, in,
                        MustRun(*backend, options, in, EntryPoint::kDecode),
                        4e-3, st == StateDType::kF32 ? 1e-4 : 4e-3);
  }
}

TEST(CpuBackendConsistencyTest, ThreadCountDoesNotChangeResults) {
  // One sequence on one head: with more threads the head is split by
  // columns; the columns never mix, so results are bit for bit the same.
  const GdnOptions options = Options(1, 1, 128, 128, DType::kBF16, StateDType::kBF16);
  const oracle::Inputs in = MakeRandomInputs(options, {100}, 16, true);
  std::unique_ptr<Backend> one = CreateCpuBackend(1);
  const BackendOutputs reference = MustRun(*one, options, in, EntryPoint::kPrefill);
  for (int threads : {2, 3, 8}) {
    std::unique_ptr<Backend> many = CreateCpuBackend(threads);
    const BackendOutputs out = MustRun(*many, options, in, EntryPoint::kPrefill);
    EXPECT_EQ(out.o, reference.o) << threads << " threads";
    EXPECT_EQ(out.final_states, reference.final_states) << threads << " threads";
  }
}

// Extreme inputs: finite in, finite out, and still the oracle's function.

void Scale(std::vector<float>* x, float factor, DType dtype) {
  for (float& e : *x) e *= factor;
  RoundThrough(dtype, x->data(), x->size());
}

TEST(CpuBackendExtremeInputsTest, AllEqualTokens) {
  const GdnOptions options = Options(1, 2, 64, 64, DType::kF32, StateDType::kF32);
  oracle::Inputs in = MakeRandomInputs(options, {300}, 17, true);
  const int64_t qk = 64, v = 2 * 64, h = 2;
  for (int64_t t = 1; t < 300; ++t) {
    std::copy(in.q.begin(), in.q.begin() + qk, in.q.begin() + t * qk);
    std::copy(in.k.begin(), in.k.begin() + qk, in.k.begin() + t * qk);
    std::copy(in.v.begin(), in.v.begin() + v, in.v.begin() + t * v);
    std::copy(in.g.begin(), in.g.begin() + h, in.g.begin() + t * h);
    std::copy(in.beta.begin(), in.beta.begin() + h, in.beta.begin() + t * h);
  }
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  ExpectMatchesOracle(options, in,
                      MustRun(*backend, options, in, EntryPoint::kPrefill),
                      1e-4, 1e-4);
}

TEST(CpuBackendExtremeInputsTest, HugeAndTinyMagnitudes) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (bool l2 : {true, false}) {
      for (float factor : {1e4f, 1e-6f}) {
        GdnOptions options = Options(1, 2, 64, 128, dtype, StateDType::kF32);
        options.l2_norm_qk = l2;
        oracle::Inputs in = MakeRandomInputs(options, {40, 3}, 18, true);
        // v and the state scale together (the state is a sum of k v^T); q, k
        // too when the kernel normalises them.
        Scale(&in.v, factor, dtype);
        for (auto& s : in.initial_states) Scale(&s, factor, DType::kF32);
        if (l2) {
          Scale(&in.q, factor, dtype);
          Scale(&in.k, factor, dtype);
        }
        SCOPED_TRACE(std::string(DTypeName(dtype)) + (l2 ? " l2" : " raw") +
                     " x" + std::to_string(factor));
        std::unique_ptr<Backend> backend = CreateCpuBackend(2);
        ExpectMatchesOracle(options, in,
                            MustRun(*backend, options, in, EntryPoint::kPrefill),
                            dtype == DType::kF32 ? 1e-4 : 4e-3, 1e-4);
      }
    }
  }
}

TEST(CpuBackendExtremeInputsTest, Fp16SubnormalActivations) {
  // v ~ 2e-5 is mostly below fp16's smallest normal (6.1e-5): the kernel
  // must decode subnormal halves exactly, which the fp32 final state shows
  // to 1e-4. o is as small, so its own fp16 rounding quantum (2^-25 at most)
  // is ~1e-3 of max|o| and more of the small entries.
  GdnOptions options = Options(1, 2, 64, 64, DType::kF16, StateDType::kF32);
  options.scale = 1.0f;  // keeps o near v's magnitude
  oracle::Inputs in = MakeRandomInputs(options, {30}, 24, true);
  Scale(&in.v, 2e-5f, DType::kF16);
  for (auto& s : in.initial_states) Scale(&s, 2e-5f, DType::kF32);
  int subnormal = 0;
  for (float v : in.v) subnormal += v != 0 && std::abs(v) < 6.1e-5f;
  ASSERT_GT(subnormal, int(in.v.size()) / 2);
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  ExpectMatchesOracle(options, in,
                      MustRun(*backend, options, in, EntryPoint::kPrefill),
                      3e-3, 1e-4);
}

TEST(CpuBackendExtremeInputsTest, BetaZeroAndOneAndHugeDecay) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  for (GateProfile profile : {GateProfile::kBetaZero, GateProfile::kBetaOne,
                              GateProfile::kStrongDecay}) {
    for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
      GdnOptions options = Options(2, 2, 64, 64, DType::kF32, StateDType::kF32, gating);
      options.l2_norm_qk = false;  // unit k from the generator: beta 1 overwrites
      oracle::Inputs in = MakeRandomInputs(options, {200}, 19, true, profile);
      SCOPED_TRACE(std::string(testing::GateProfileName(profile)) + " " +
                   std::string(GatingModeName(gating)));
      ExpectMatchesOracle(options, in,
                          MustRun(*backend, options, in, EntryPoint::kPrefill),
                          1e-4, 1e-4);
    }
  }
  // softplus far past its threshold: g = -exp(A_log) * 1e4, exp(g) = 0.
  GdnOptions options = Options(1, 1, 64, 64, DType::kF32, StateDType::kF32,
                               GatingMode::kFused);
  oracle::Inputs in = MakeRandomInputs(options, {50}, 20, true);
  for (float& a : in.a) a = 1e4f;
  ExpectMatchesOracle(options, in,
                      MustRun(*backend, options, in, EntryPoint::kPrefill),
                      1e-4, 1e-4);
}

TEST(CpuBackendExtremeInputsTest, NoDecayFor10kSteps) {
  // g = 0 for 10k tokens: nothing forgets, the delta rule alone keeps the
  // state bounded (|1 - beta |k|^2| <= 1 along k).
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    const GdnOptions options = Options(1, 1, 64, 64, DType::kBF16, st);
    const oracle::Inputs in =
        MakeRandomInputs(options, {10000}, 21, true, GateProfile::kNoDecay);
    std::unique_ptr<Backend> backend = CreateCpuBackend(2);
    ExpectMatchesOracle(options, in,
                        MustRun(*backend, options, in, EntryPoint::kPrefill),
                        4e-3, st == StateDType::kF32 ? 1e-4 : 4e-3);
  }
}

// Bad params: InvalidArgument naming the field, and not a byte of the pool
// (or o) touched.

class CpuBackendBadParamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = CreateCpuBackend(2);
    options_ = Options(2, 4, 64, 64, DType::kBF16, StateDType::kF32);
    inputs_ = MakeRandomInputs(options_, {3, 5, 2}, 22, true);
    Stage(options_, inputs_);
  }
  void Stage(const GdnOptions& options, const oracle::Inputs& inputs) {
    absl::StatusOr<std::unique_ptr<testing::StagedCall>> call =
        testing::StagedCall::Create(*backend_, options, inputs);
    ASSERT_TRUE(call.ok()) << call.status();
    call_ = *std::move(call);
    good_initial_ = call_->initial_pages();
    good_final_ = call_->final_pages();
  }
  void ExpectRejected(const GdnOptions& options, EntryPoint entry,
                      const std::string& field) {
    const absl::Status st = entry == EntryPoint::kDecode
                                ? backend_->Decode(options, call_->params())
                                : backend_->Prefill(options, call_->params());
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(std::string(st.message()), HasSubstr(field));
    absl::StatusOr<std::vector<uint8_t>> pool = call_->PoolBytes();
    ASSERT_TRUE(pool.ok());
    EXPECT_TRUE(*pool == call_->staged_pool_bytes()) << field << ": pool written";
    const std::vector<int32_t> initial = call_->initial_pages();
    const std::vector<int32_t> final_pages = call_->final_pages();
    ASSERT_TRUE(call_->SetPages(good_initial_, good_final_).ok());  // to fetch
    absl::StatusOr<BackendOutputs> out = call_->Fetch();
    ASSERT_TRUE(call_->SetPages(initial, final_pages).ok());
    ASSERT_TRUE(out.ok()) << out.status();
    for (float o : out->o) {
      ASSERT_TRUE(std::isnan(o)) << field << ": o written";
    }
  }

  std::unique_ptr<Backend> backend_;
  GdnOptions options_;
  oracle::Inputs inputs_;
  std::unique_ptr<testing::StagedCall> call_;
  std::vector<int32_t> good_initial_, good_final_;
};

TEST_F(CpuBackendBadParamsTest, ValidCallSucceeds) {
  // The fixture itself is fine: the same call runs and writes o.
  ASSERT_TRUE(call_->Run(EntryPoint::kDecode).ok());
  absl::StatusOr<BackendOutputs> out = call_->Fetch();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Compare(out->o.data(), oracle::Run(options_, inputs_).o.data(),
                    out->o.size()).nonfinite, 0);
}

TEST_F(CpuBackendBadParamsTest, DecodeWithNineTokens) {
  inputs_ = MakeRandomInputs(options_, {3, 9}, 23, true);
  Stage(options_, inputs_);
  ExpectRejected(options_, EntryPoint::kDecode, "sequence 1 has 9 tokens");
}

TEST_F(CpuBackendBadParamsTest, PageIdsOutOfRange) {
  const int32_t n = call_->params().pool.num_pages;
  const std::vector<int32_t> good_initial = good_initial_;
  const std::vector<int32_t> good_final = good_final_;
  // The first sequences are valid: nothing may be written before the check.
  std::vector<int32_t> initial = good_initial;
  initial[2] = n;
  ASSERT_TRUE(call_->SetPages(initial, good_final).ok());
  ExpectRejected(options_, EntryPoint::kPrefill, "initial_pages[2]");
  initial[2] = -2;  // negative but not kZeroStatePage
  ASSERT_TRUE(call_->SetPages(initial, good_final).ok());
  ExpectRejected(options_, EntryPoint::kDecode, "initial_pages[2]");
  std::vector<int32_t> final_pages = good_final;
  final_pages[1] = kZeroStatePage;  // only valid as an initial page
  ASSERT_TRUE(call_->SetPages(good_initial, final_pages).ok());
  ExpectRejected(options_, EntryPoint::kPrefill, "final_pages[1]");
  final_pages[1] = n + 5;
  ASSERT_TRUE(call_->SetPages(good_initial, final_pages).ok());
  ExpectRejected(options_, EntryPoint::kDecode, "final_pages[1]");
}

TEST_F(CpuBackendBadParamsTest, NullPointersForTheGatingMode) {
  call_->params().g = nullptr;
  ExpectRejected(options_, EntryPoint::kPrefill, "g must be set");
  // Fused gating staged from direct inputs: a, b, A_log, dt_bias are null.
  GdnOptions fused = options_;
  fused.gating = GatingMode::kFused;
  ExpectRejected(fused, EntryPoint::kDecode, "a must be set");
}

TEST_F(CpuBackendBadParamsTest, MismatchedPoolDtype) {
  call_->params().pool.dtype = StateDType::kBF16;
  ExpectRejected(options_, EntryPoint::kPrefill, "pool dtype");
  call_->params().pool.dtype = StateDType::kF32;
  call_->params().pool.page_bytes -= 256;
  ExpectRejected(options_, EntryPoint::kPrefill, "pool.page_bytes");
}

TEST_F(CpuBackendBadParamsTest, UnsupportedShape) {
  GdnOptions bad = options_;
  bad.shape.head_dim_k = 96;
  ExpectRejected(bad, EntryPoint::kPrefill, "head_dim_k");
  bad = options_;
  bad.shape.num_v_heads = 5;  // not a multiple of Hqk = 2
  ExpectRejected(bad, EntryPoint::kDecode, "num_v_heads");
}

}  // namespace
}  // namespace gdn
