// Shared by the chunked prefill's GPU tests (chunked_prefill_test.cc,
// chunked_prefill_route_test.cc): v7's accuracy bars against the float64
// oracle, ChunkedOnlyBackend (the cuda backend whose Prefill always takes one
// ChunkedPrefill launcher, whatever the backend's routing policy, while
// staging, copies and Decode stay the backend's own), and the fixture
// ChunkedPrefillTest with ExpectPrefillMatches. Test-only header: one
// test binary includes it (anonymous namespace).
#ifndef GDN_TESTS_GPU_CHUNKED_PREFILL_FIXTURE_H_
#define GDN_TESTS_GPU_CHUNKED_PREFILL_FIXTURE_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/chunked_prefill.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {

// bf16 tensor-core operands (bf16 and fp32 inputs: W, U, S, Q, K in bf16;
// fp32 accumulation), the roundings of flash-linear-attention's
// chunk_gated_delta_rule. Measured on the H200
// (bench/results/2026-11-29-prefill.md): ours 5-8e-3 max_abs_rel and ~4.5e-3
// rel_l2 on outputs, FLA 5-8e-3 max_abs_rel on the same inputs.
constexpr double kMaxAbsRelTolerance = 1e-2;
constexpr double kRelL2Tolerance = 6e-3;
// fp16 inputs get fp16 operands (kernels/cuda/chunked/mma_16bit.cuh), 2^-11
// roundings instead of 2^-9: FLA measured 6.7e-4 / 8.3e-4 max_abs_rel there
// (bench/results/2026-12-01-prefill-v6.md), bf16 operands 5.3e-3 / 7.4e-3.
constexpr double kF16MaxAbsRelTolerance = 2e-3;
constexpr double kF16RelL2Tolerance = 1.5e-3;

struct Tolerance {
  double max_abs_rel;
  double rel_l2;
};
Tolerance ChunkedOutputTolerance(const GdnOptions& options) {
  if (options.input_dtype == DType::kF16) return {kF16MaxAbsRelTolerance, kF16RelL2Tolerance};
  return {kMaxAbsRelTolerance, kRelL2Tolerance};
}
// Final states in bf16 pages are rounded once more when stored (8
// significant bits: up to 2^-8 of max|ref|, 2^-9 typical): 1.04e-2
// max_abs_rel was measured at Hqk 2 Hv 4 K 128 V 64, fused gating, strong
// decay, seed 11210603305967180273 (H200, 2026-12-01; rel_l2 3.3e-3), in
// about one run in ten of that case.
// int8 / fp8 pages: the initial state rounded to nearest when staged (the
// oracle keeps it unrounded) and the final state rounded once when stored
// (stochastic rounding: up to a whole step). A step is a column pair's max /
// 127 for int8, 2^-3 of the element for fp8 (3 mantissa bits); the rel_l2
// bars are quantized_state_test's for the chunked prefill.
Tolerance ChunkedStateTolerance(const GdnOptions& options) {
  Tolerance t = ChunkedOutputTolerance(options);
  if (options.state_dtype == StateDType::kBF16) {
    t.max_abs_rel += 0x1p-8;
    t.rel_l2 += 0x1p-9;
  } else if (options.state_dtype == StateDType::kInt8) {
    t.max_abs_rel += 0x1p-7 + 0x1p-8;
    t.rel_l2 = 1.5e-2;
  } else if (options.state_dtype == StateDType::kFP8) {
    t.max_abs_rel += 0x1p-3 + 0x1p-4;
    t.rel_l2 = 5e-2;
  }
  return t;
}

// Every token of each sequence made equal to the sequence's first (q, k, v;
// the gates stay random): seed 000's all-equal extreme input, where the rows
// of W and U are small differences of O(1) terms.
void MakeTokensEqualWithinSequences(const GdnOptions& options, oracle::Inputs* in) {
  const int64_t qk = int64_t{options.shape.num_qk_heads} * options.shape.head_dim_k;
  const int64_t v = int64_t{options.shape.num_v_heads} * options.shape.head_dim_v;
  for (int n = 0; n < in->num_seqs(); ++n) {
    const int64_t first = in->cu_seqlens[n];
    for (int64_t t = first + 1; t < in->cu_seqlens[n + 1]; ++t) {
      std::copy_n(in->q.begin() + first * qk, qk, in->q.begin() + t * qk);
      std::copy_n(in->k.begin() + first * qk, qk, in->k.begin() + t * qk);
      std::copy_n(in->v.begin() + first * v, v, in->v.begin() + t * v);
    }
  }
}

// Whether the current device runs v8 (compute capability 9.0: its kernels
// are sm_90a only), and its SM count (0 when unreadable).
inline bool DeviceIsSm90() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    return false;
  }
  return major == 9 && minor == 0;
}

inline int SmCount() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 0;
  }
  return sms;
}

class ChunkedOnlyBackend : public Backend {
 public:
  explicit ChunkedOnlyBackend(Backend& inner) : inner_(inner) {}
  absl::string_view name() const override { return inner_.name(); }
  std::string device_description() const override { return inner_.device_description(); }
  absl::Status Supports(const GdnOptions& o) const override {
    return cuda::ChunkedPrefill::Supports(o);
  }
  absl::Status Decode(const GdnOptions& o, const GdnParams& p) override {
    return inner_.Decode(o, p);
  }
  // The inner backend's stream is private: order by synchronising around a
  // call on the legacy default stream.
  absl::Status Prefill(const GdnOptions& o, const GdnParams& p) override {
    if (absl::Status s = inner_.Synchronize(); !s.ok()) return s;
    if (absl::Status s = chunked_.Run(o, p, /*stream=*/nullptr, v_tile_); !s.ok()) return s;
    const cudaError_t e = cudaStreamSynchronize(nullptr);
    if (e != cudaSuccess) return absl::InternalError(cudaGetErrorString(e));
    return absl::OkStatus();
  }
  absl::StatusOr<void*> Allocate(size_t bytes) override { return inner_.Allocate(bytes); }
  void Free(void* ptr) override { inner_.Free(ptr); }
  absl::StatusOr<void*> AllocateHost(size_t bytes) override { return inner_.AllocateHost(bytes); }
  void FreeHost(void* ptr) override { inner_.FreeHost(ptr); }
  absl::Status CopyToDevice(void* d, const void* s, size_t n) override {
    return inner_.CopyToDevice(d, s, n);
  }
  absl::Status CopyToHost(void* d, const void* s, size_t n) override {
    return inner_.CopyToHost(d, s, n);
  }
  absl::Status CopyOnDevice(void* d, const void* s, size_t n) override {
    return inner_.CopyOnDevice(d, s, n);
  }
  absl::Status Synchronize() override { return inner_.Synchronize(); }
  DeviceMemoryInfo MemoryInfo() const override { return inner_.MemoryInfo(); }

  // The V tile (0 auto) and kernel 2's form (ChunkedPrefill::set_state_pass)
  // of the following calls.
  void Configure(int v_tile, cuda::ChunkedStatePass form = cuda::ChunkedStatePass::kAuto) {
    chunked_.set_state_pass(form);
    v_tile_ = v_tile;
  }
  // The launcher itself (its generation knob, v8 threshold, last_generation).
  cuda::ChunkedPrefill& launcher() { return chunked_; }

 private:
  Backend& inner_;
  cuda::ChunkedPrefill chunked_;
  int v_tile_ = 0;
};

class ChunkedPrefillTest : public CudaBackendTest {
 protected:
  void SetUp() override {
    CudaBackendTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    chunked_ = std::make_unique<ChunkedOnlyBackend>(*backend_);
  }

  // Chunked prefill (through `via`, default the chunked-only wrapper) vs the
  // oracle on fresh inputs (all tokens of a sequence equal with
  // `equal_tokens`), within OutputTolerance / StateTolerance. Returns the
  // output's errors.
  testing::ErrorStats ExpectPrefillMatches(
      const GdnOptions& options, const std::vector<int>& lens, bool random_initial_state,
      testing::GateProfile profile = testing::GateProfile::kRandom, Backend* via = nullptr,
      bool equal_tokens = false) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat(DescribeOptions(options), " seqs ", lens.size(), " first len ",
                              lens[0], " profile ", testing::GateProfileName(profile),
                              equal_tokens ? " equal tokens" : "", " seed ", seed));
    oracle::Inputs inputs =
        testing::MakeRandomInputs(options, lens, seed, random_initial_state, profile);
    if (equal_tokens) MakeTokensEqualWithinSequences(options, &inputs);
    testing::SetQkRowMagnitudes(options, q_max_, k_max_, &inputs);
    absl::StatusOr<testing::BackendOutputs> got =
        testing::RunOnBackend(via != nullptr ? *via : *chunked_, options, inputs,
                              testing::EntryPoint::kPrefill);
    if (!got.ok()) {
      ADD_FAILURE() << got.status();
      return {};
    }
    const oracle::Outputs want = oracle::Run(options, inputs);
    EXPECT_EQ(got->o.size(), want.o.size());
    if (got->o.size() != want.o.size()) return {};
    const Tolerance o_tol = ChunkedOutputTolerance(options);
    const Tolerance s_tol = ChunkedStateTolerance(options);
    const testing::ErrorStats o_err =
        testing::Compare(got->o.data(), want.o.data(), want.o.size());
    EXPECT_EQ(o_err.nonfinite, 0) << testing::ToString(o_err);
    EXPECT_LE(o_err.max_abs_rel, o_tol.max_abs_rel) << "o: " << testing::ToString(o_err);
    EXPECT_LE(o_err.rel_l2, o_tol.rel_l2) << "o: " << testing::ToString(o_err);
    EXPECT_EQ(got->final_states.size(), want.final_states.size());
    for (size_t i = 0; i < want.final_states.size() && i < got->final_states.size(); ++i) {
      const testing::ErrorStats s_err = testing::Compare(
          got->final_states[i].data(), want.final_states[i].data(), want.final_states[i].size());
      EXPECT_EQ(s_err.nonfinite, 0) << "state " << i << ": " << testing::ToString(s_err);
      EXPECT_LE(s_err.max_abs_rel, s_tol.max_abs_rel)
          << "state " << i << ": " << testing::ToString(s_err);
      EXPECT_LE(s_err.rel_l2, s_tol.rel_l2) << "state " << i << ": " << testing::ToString(s_err);
    }
    return o_err;
  }

  // A prefill with prefix states every `interval` tokens against the
  // oracle: every checkpoint page within the final-state bars, o within
  // its bars.
  void ExpectCheckpointsMatch(const GdnOptions& options, const oracle::Inputs& inputs,
                              const testing::BackendOutputs& got, int interval) {
    absl::StatusOr<testing::ErrorStats> e = testing::CompareCheckpointStates(
        got.checkpoint_states, testing::OracleCheckpointStates(options, inputs, interval));
    ASSERT_TRUE(e.ok()) << e.status();
    const Tolerance tol = ChunkedStateTolerance(options);
    EXPECT_EQ(e->nonfinite, 0);
    EXPECT_LE(e->max_abs_rel, tol.max_abs_rel) << testing::ToString(*e);
    EXPECT_LE(e->rel_l2, tol.rel_l2) << testing::ToString(*e);
    const oracle::Outputs want = oracle::Run(options, inputs);
    const testing::ErrorStats o_err = testing::Compare(got.o.data(), want.o.data(), want.o.size());
    EXPECT_LE(o_err.max_abs_rel, ChunkedOutputTolerance(options).max_abs_rel)
        << testing::ToString(o_err);
  }

  // After a call with an unusable page id: o all NaN and the pool as staged.
  void ExpectNanAndPoolUntouched(const GdnOptions& options, testing::StagedCall& call) {
    absl::StatusOr<std::vector<float>> o = ReadOutput(*chunked_, options, call.params());
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_TRUE(std::all_of(o->begin(), o->end(), [](float x) { return x != x; }));
    absl::StatusOr<std::vector<uint8_t>> pool = call.PoolBytes();
    ASSERT_TRUE(pool.ok()) << pool.status();
    EXPECT_TRUE(*pool == call.staged_pool_bytes()) << "a page of the pool changed";
  }

  std::unique_ptr<ChunkedOnlyBackend> chunked_;
  // Row magnitudes ExpectPrefillMatches gives q / k (SetQkRowMagnitudes;
  // empty: as drawn).
  std::vector<float> q_max_, k_max_;
};

GdnOptions Options(int hqk, int hv, int k, int v) {
  GdnOptions options;
  options.shape.num_qk_heads = hqk;
  options.shape.num_v_heads = hv;
  options.shape.head_dim_k = k;
  options.shape.head_dim_v = v;
  return options;
}

}  // namespace
}  // namespace gdn::gpu_test

#endif  // GDN_TESTS_GPU_CHUNKED_PREFILL_FIXTURE_H_
