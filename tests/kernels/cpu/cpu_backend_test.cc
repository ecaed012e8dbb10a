// The cpu backend against the float64 oracle on fresh random inputs, over a
// fixed list of awkward cases sampled from the grid
//   T in {1, 2, 63, 64, 65, 1000} x batch {1, 3, 7} x Hv/Hqk in {1, 2, 4} x
//   K, V in {64, 128} x input dtype x state dtype x gating x L2 norm x
//   zero / random initial state x gate profile x Decode / Prefill
// (every value of every axis appears; the full product would take minutes).
// Plus the Backend memory operations.
#include <cstring>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/recurrence_kernel.h"
#include "kernels/oracle/gdn_oracle.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn {
namespace {

using testing::BackendOutputs;
using testing::Compare;
using testing::EntryPoint;
using testing::ErrorStats;
using testing::GateProfile;

struct Tolerance {
  double max_abs_rel;
  double rel_l2;
};

// Outputs are stored in the input dtype, so one rounding of o bounds the
// error: half an ulp, at most 2^-8 ~ 3.9e-3 (bf16, 8 significant bits) or
// 2^-11 ~ 4.9e-4 (fp16) of |o_j| <= max|o|, plus the fp32 arithmetic (~1e-6
// over these lengths; 1e-4 leaves room for long no-decay runs). The rel_l2 of
// a rounding is well below its max (errors are spread over [0, half ulp]).
Tolerance OutputTolerance(DType dtype) {
  switch (dtype) {
    case DType::kF32: return {1e-4, 1e-4};
    case DType::kF16: return {6e-4, 4e-4};
    case DType::kBF16: return {4e-3, 3e-3};
  }
  return {0, 0};
}

// An fp32 state differs from float64 only by fp32 arithmetic; a bf16 state
// is rounded once at the end of the call: half an ulp is at most 2^-8 of the
// element, so a few 1e-3 of max|S| (4e-3 = 2^-8 plus the arithmetic).
Tolerance StateTolerance(StateDType dtype) {
  return dtype == StateDType::kF32 ? Tolerance{1e-4, 1e-4}
                                   : Tolerance{4e-3, 3e-3};
}

struct GridCase {
  std::vector<int> seq_lens;
  int hqk, hv, k, v;
  DType input;
  StateDType state;
  GatingMode gating;
  bool l2_norm;
  bool random_initial;
  GateProfile profile;
  EntryPoint entry;
};

// The test name (CaseName) already says everything; keep gtest from printing
// the raw bytes into every listed name.
void PrintTo(const GridCase&, std::ostream* os) { *os << "GridCase"; }

constexpr auto F32 = DType::kF32;
constexpr auto BF16 = DType::kBF16;
constexpr auto F16 = DType::kF16;
constexpr auto SF32 = StateDType::kF32;
constexpr auto SBF16 = StateDType::kBF16;
constexpr auto DIRECT = GatingMode::kDirect;
constexpr auto FUSED = GatingMode::kFused;
constexpr bool L2 = true, RAW = false, RAND = true, ZERO = false;
constexpr auto RANDOM = GateProfile::kRandom;
constexpr auto NO_DECAY = GateProfile::kNoDecay;
constexpr auto STRONG = GateProfile::kStrongDecay;
constexpr auto BETA0 = GateProfile::kBetaZero;
constexpr auto BETA1 = GateProfile::kBetaOne;
constexpr auto DEC = EntryPoint::kDecode;
constexpr auto PRE = EntryPoint::kPrefill;

const std::vector<int> kT1 = {1};
const std::vector<int> kB3T1 = {1, 1, 1};
const std::vector<int> kB7Mixed = {1, 8, 3, 5, 2, 7, 4};  // decode, 1..8 tokens
const std::vector<int> kT2 = {2};
const std::vector<int> kB7T8 = {8, 8, 8, 8, 8, 8, 8};
const std::vector<int> kT63 = {63};
const std::vector<int> kT64 = {64};
const std::vector<int> kT65 = {65};
const std::vector<int> kT1000 = {1000};
const std::vector<int> kB3Chunks = {63, 64, 65};
const std::vector<int> kB7Varlen = {1, 2, 63, 64, 65, 3, 100};

const GridCase kCases[] = {
    {kT1, 1, 1, 64, 64, F32, SF32, DIRECT, L2, ZERO, RANDOM, DEC},
    {kT1, 2, 4, 128, 128, BF16, SF32, FUSED, L2, RAND, RANDOM, DEC},
    {kB3T1, 4, 4, 64, 128, F16, SBF16, DIRECT, RAW, RAND, NO_DECAY, DEC},
    {kB3T1, 1, 2, 128, 64, BF16, SBF16, FUSED, L2, ZERO, BETA1, DEC},
    {kB7Mixed, 2, 4, 128, 128, BF16, SF32, DIRECT, L2, RAND, RANDOM, DEC},
    {kB7Mixed, 1, 1, 64, 64, F16, SF32, FUSED, RAW, RAND, STRONG, DEC},
    {kB7Mixed, 2, 2, 128, 64, F32, SBF16, DIRECT, L2, RAND, BETA0, DEC},
    {kT2, 1, 4, 64, 128, BF16, SBF16, FUSED, RAW, RAND, RANDOM, DEC},
    {kT2, 2, 2, 64, 64, F32, SF32, DIRECT, L2, ZERO, BETA1, PRE},
    {kB7T8, 4, 4, 128, 128, F16, SF32, DIRECT, L2, RAND, NO_DECAY, DEC},
    {kB7T8, 1, 2, 64, 64, BF16, SBF16, FUSED, L2, RAND, STRONG, DEC},
    {kT63, 1, 1, 64, 64, F32, SF32, DIRECT, L2, RAND, RANDOM, PRE},
    {kT63, 2, 4, 128, 64, BF16, SF32, FUSED, RAW, ZERO, NO_DECAY, PRE},
    {kT63, 1, 2, 64, 128, F16, SBF16, DIRECT, L2, RAND, BETA1, PRE},
    {kT64, 2, 2, 128, 128, F32, SBF16, FUSED, L2, RAND, RANDOM, PRE},
    {kT64, 1, 4, 64, 64, F16, SF32, DIRECT, RAW, RAND, STRONG, PRE},
    {kT64, 4, 4, 64, 128, BF16, SF32, DIRECT, L2, RAND, BETA0, PRE},
    {kT65, 1, 1, 128, 128, BF16, SBF16, DIRECT, L2, ZERO, RANDOM, PRE},
    {kT65, 2, 4, 64, 64, F32, SF32, FUSED, L2, RAND, BETA1, PRE},
    {kT65, 1, 2, 128, 64, F16, SF32, FUSED, RAW, RAND, NO_DECAY, PRE},
    {kT1000, 1, 1, 64, 64, F32, SF32, DIRECT, L2, RAND, RANDOM, PRE},
    {kT1000, 1, 2, 64, 64, BF16, SBF16, FUSED, RAW, RAND, RANDOM, PRE},
    {kT1000, 1, 1, 64, 64, F16, SF32, DIRECT, L2, ZERO, NO_DECAY, PRE},
    {kT1000, 1, 1, 128, 64, BF16, SF32, FUSED, L2, RAND, STRONG, PRE},
    {kT1000, 1, 1, 64, 128, F32, SBF16, DIRECT, L2, RAND, BETA1, PRE},
    {kB3Chunks, 2, 2, 64, 64, F32, SF32, DIRECT, RAW, RAND, RANDOM, PRE},
    {kB3Chunks, 1, 4, 128, 128, BF16, SBF16, FUSED, L2, RAND, BETA0, PRE},
    {kB3Chunks, 2, 4, 64, 128, F16, SF32, DIRECT, L2, ZERO, RANDOM, PRE},
    {kB3Chunks, 4, 4, 128, 64, F32, SF32, FUSED, L2, RAND, NO_DECAY, PRE},
    {kB7Varlen, 1, 2, 64, 64, BF16, SF32, FUSED, L2, RAND, RANDOM, PRE},
    {kB7Varlen, 2, 2, 64, 64, F16, SBF16, DIRECT, L2, RAND, STRONG, PRE},
    {kB7Varlen, 1, 1, 128, 128, F32, SF32, DIRECT, RAW, ZERO, BETA1, PRE},
    {kB7Varlen, 2, 4, 64, 128, BF16, SF32, DIRECT, L2, RAND, BETA0, PRE},
    {kT1, 1, 1, 128, 64, F16, SBF16, DIRECT, L2, RAND, RANDOM, PRE},
    {kB3T1, 4, 4, 128, 128, F32, SF32, FUSED, RAW, ZERO, RANDOM, PRE},
    {kB7Mixed, 1, 4, 64, 64, BF16, SF32, DIRECT, L2, RAND, RANDOM, PRE},
    {kT2, 2, 4, 128, 128, F16, SBF16, FUSED, L2, RAND, NO_DECAY, DEC},
    {kT63, 4, 4, 64, 64, BF16, SF32, DIRECT, L2, RAND, BETA1, PRE},
    {kT65, 2, 2, 64, 128, F32, SBF16, FUSED, RAW, ZERO, STRONG, PRE},
    {kB7T8, 1, 1, 64, 64, F32, SBF16, DIRECT, L2, RAND, BETA0, DEC},
};

GdnOptions OptionsFor(const GridCase& c) {
  GdnOptions options;
  options.shape = {c.hqk, c.hv, c.k, c.v};
  options.input_dtype = c.input;
  options.state_dtype = c.state;
  options.gating = c.gating;
  options.l2_norm_qk = c.l2_norm;
  return options;
}

// Each case runs on both builds of the kernel: AVX2 + FMA (where the machine
// has it) and the generic one that CI machines without AVX2 take.
using GridParam = std::tuple<GridCase, bool>;

std::string CaseName(const ::testing::TestParamInfo<GridParam>& info) {
  const GridCase& c = std::get<0>(info.param);
  int total = 0;
  for (int len : c.seq_lens) total += len;
  std::string name = "c" + std::to_string(info.index) + "_n" +
                     std::to_string(c.seq_lens.size()) + "_t" +
                     std::to_string(total) + "_h" + std::to_string(c.hqk) +
                     "x" + std::to_string(c.hv) + "_k" + std::to_string(c.k) +
                     "v" + std::to_string(c.v) + "_" +
                     std::string(DTypeName(c.input)) + "_state" +
                     std::string(StateDTypeName(c.state)) + "_" +
                     std::string(GatingModeName(c.gating)) +
                     (c.l2_norm ? "_l2" : "_raw") +
                     (c.random_initial ? "_init" : "_zero") + "_" +
                     testing::GateProfileName(c.profile) +
                     (c.entry == DEC ? "_decode" : "_prefill") +
                     (std::get<1>(info.param) ? "_avx2" : "_generic");
  return name;
}

class CpuBackendVsOracleTest : public ::testing::TestWithParam<GridParam> {
 protected:
  void TearDown() override { cpu::AllowAvx2ForTesting(true); }
};

TEST_P(CpuBackendVsOracleTest, MatchesOracle) {
  const GridCase& c = std::get<0>(GetParam());
  cpu::AllowAvx2ForTesting(std::get<1>(GetParam()));
  const GdnOptions options = OptionsFor(c);
  ASSERT_TRUE(ValidateOptions(options).ok());
  const uint64_t seed = 1000 + std::hash<std::string>()(DescribeOptions(options)) % 1000;
  const oracle::Inputs inputs = testing::MakeRandomInputs(
      options, c.seq_lens, seed, c.random_initial, c.profile);
  const oracle::Outputs ref = oracle::Run(options, inputs);

  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  RecordProperty("isa", cpu::KernelIsa());
  absl::StatusOr<BackendOutputs> got =
      testing::RunOnBackend(*backend, options, inputs, c.entry);
  ASSERT_TRUE(got.ok()) << got.status();

  const Tolerance o_tol = OutputTolerance(c.input);
  const ErrorStats o = Compare(got->o.data(), ref.o.data(), ref.o.size());
  RecordProperty("o_max_abs_rel", testing::ToString(o));
  EXPECT_EQ(o.nonfinite, 0);
  EXPECT_LE(o.max_abs_rel, o_tol.max_abs_rel) << testing::ToString(o);
  EXPECT_LE(o.rel_l2, o_tol.rel_l2) << testing::ToString(o);

  const Tolerance s_tol = StateTolerance(c.state);
  ASSERT_EQ(got->final_states.size(), ref.final_states.size());
  for (size_t i = 0; i < ref.final_states.size(); ++i) {
    const ErrorStats s = Compare(got->final_states[i].data(),
                                 ref.final_states[i].data(),
                                 ref.final_states[i].size());
    if (i == 0) RecordProperty("state0", testing::ToString(s));
    EXPECT_EQ(s.nonfinite, 0) << "sequence " << i;
    EXPECT_LE(s.max_abs_rel, s_tol.max_abs_rel)
        << "sequence " << i << ": " << testing::ToString(s);
    EXPECT_LE(s.rel_l2, s_tol.rel_l2)
        << "sequence " << i << ": " << testing::ToString(s);
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, CpuBackendVsOracleTest,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Bool()),
                         CaseName);

// Issue 21, defect 6: q/k rows whose sum(x^2) overflows fp32 (max |x| 1e20
// or 3e38, which bf16 holds) or underflows (1e-30) under the in-kernel L2
// norm: o and the final state still match the oracle, every head. Rows
// cycle through the magnitudes (q and k out of step), so every token has
// both normal and extreme rows.
using ExtremeParam = std::tuple<DType, EntryPoint, int, bool>;

class CpuBackendExtremeQkTest : public ::testing::TestWithParam<ExtremeParam> {
 protected:
  void TearDown() override { cpu::AllowAvx2ForTesting(true); }
};

TEST_P(CpuBackendExtremeQkTest, HugeAndTinyRowsMatchOracle) {
  const auto [dtype, entry, dim, avx2] = GetParam();
  cpu::AllowAvx2ForTesting(avx2);
  GdnOptions options;
  options.shape = {2, 4, dim, dim};
  options.input_dtype = dtype;
  options.l2_norm_qk = true;
  const std::vector<int> lens =
      entry == DEC ? std::vector<int>{1, 8, 3} : std::vector<int>{65, 7};
  oracle::Inputs inputs =
      testing::MakeRandomInputs(options, lens, 21, /*random_initial_state=*/true);
  testing::SetQkRowMagnitudes(options, {0, 1e20f, 3e38f, 1e-30f, 2e19f},
                              {1e30f, 0, 1e-30f, 3e38f, 1e20f}, &inputs);
  const oracle::Outputs ref = oracle::Run(options, inputs);
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  absl::StatusOr<BackendOutputs> got =
      testing::RunOnBackend(*backend, options, inputs, entry);
  ASSERT_TRUE(got.ok()) << got.status();

  const Tolerance o_tol = OutputTolerance(dtype);
  const ErrorStats o = Compare(got->o.data(), ref.o.data(), ref.o.size());
  EXPECT_EQ(o.nonfinite, 0);
  EXPECT_LE(o.max_abs_rel, o_tol.max_abs_rel) << testing::ToString(o);
  EXPECT_LE(o.rel_l2, o_tol.rel_l2) << testing::ToString(o);
  // Per token and head too, each against its own magnitude: a head whose o
  // is silently 0, or a tiny-q head, is a small part of the whole.
  for (size_t row = 0; row * dim < ref.o.size(); ++row) {
    const ErrorStats e =
        Compare(got->o.data() + row * dim, ref.o.data() + row * dim, dim);
    EXPECT_LE(e.max_abs_rel, 10 * o_tol.max_abs_rel)
        << "(token, head) " << row << ": " << testing::ToString(e);
  }
  const Tolerance s_tol = StateTolerance(options.state_dtype);
  for (size_t i = 0; i < ref.final_states.size(); ++i) {
    const ErrorStats s = Compare(got->final_states[i].data(),
                                 ref.final_states[i].data(),
                                 ref.final_states[i].size());
    EXPECT_EQ(s.nonfinite, 0) << "sequence " << i;
    EXPECT_LE(s.max_abs_rel, s_tol.max_abs_rel)
        << "sequence " << i << ": " << testing::ToString(s);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Magnitudes, CpuBackendExtremeQkTest,
    ::testing::Combine(::testing::Values(F32, BF16), ::testing::Values(DEC, PRE),
                       ::testing::Values(64, 128), ::testing::Bool()));

TEST(CpuBackendTest, NameAndDescription) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(3);
  EXPECT_EQ(backend->name(), "cpu");
  EXPECT_THAT(backend->device_description(), ::testing::HasSubstr("3 threads"));
}

TEST(CpuBackendTest, SupportsEveryValidConfigurationAndNamesBadFields) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(1);
  for (int k : {64, 128}) {
    for (int v : {64, 128}) {
      for (DType in : {F32, BF16, F16}) {
        for (StateDType st : {SF32, SBF16}) {
          GdnOptions options;
          options.shape = {2, 4, k, v};
          options.input_dtype = in;
          options.state_dtype = st;
          options.gating = FUSED;
          EXPECT_TRUE(backend->Supports(options).ok()) << DescribeOptions(options);
        }
      }
    }
  }
  GdnOptions bad;
  bad.shape.head_dim_k = 96;
  const absl::Status st = backend->Supports(bad);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("head_dim_k"));
}

TEST(CpuBackendTest, AllocationsAreAlignedCountedAndCopyable) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(1);
  const size_t before = backend->MemoryInfo().used_bytes;
  absl::StatusOr<void*> a = backend->Allocate(1000);
  absl::StatusOr<void*> b = backend->Allocate(1000);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*b) % 256, 0u);
  EXPECT_GE(backend->MemoryInfo().used_bytes, before + 2000);
  EXPECT_GT(backend->MemoryInfo().total_bytes, 0u);

  std::vector<uint8_t> src(1000), dst(1000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_TRUE(backend->CopyToDevice(*a, src.data(), src.size()).ok());
  ASSERT_TRUE(backend->CopyOnDevice(*b, *a, src.size()).ok());
  ASSERT_TRUE(backend->CopyToHost(dst.data(), *b, dst.size()).ok());
  ASSERT_TRUE(backend->Synchronize().ok());
  EXPECT_EQ(src, dst);
  EXPECT_EQ(backend->CopyToHost(dst.data(), nullptr, 4).code(),
            absl::StatusCode::kInvalidArgument);

  backend->Free(*a);
  backend->Free(*b);
  EXPECT_EQ(backend->MemoryInfo().used_bytes, before);

  absl::StatusOr<void*> host = backend->AllocateHost(300);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*host) % 256, 0u);
  backend->FreeHost(*host);
}

}  // namespace
}  // namespace gdn
