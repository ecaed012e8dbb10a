// Helpers shared by the GPU tests: the backend fixture that skips without a
// device, fresh seeds, and the tolerances of each dtype combination.
#ifndef GDN_TESTS_GPU_GPU_TEST_UTIL_H_
#define GDN_TESTS_GPU_GPU_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/dtype_convert.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/gdn_types.h"
#include "kernels/oracle/gdn_oracle.h"
#include "kernels/state_page_codec.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/error_stats.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/server/test_random.h"

namespace gdn::gpu_test {

// A fresh seed per draw (printed by the tests so a failure can be replayed:
// GDN_TEST_SEED=<seed> gives every draw that seed).
using testing::FreshSeed;

// Largest max_abs_rel accepted for o: the output is rounded once to the
// input dtype (bf16: 2^-9 relative, fp16: 2^-11), the rest is fp32
// arithmetic (sums over K = 128 terms: ~1e-6).
inline double OutputTolerance(const GdnOptions& options) {
  switch (options.input_dtype) {
    case DType::kF32: return 1e-4;
    case DType::kF16: return 1.5e-3;
    case DType::kBF16: return 5e-3;
  }
  return 0;
}

// Same for the final state: stored once in the state dtype.
inline double StateTolerance(const GdnOptions& options) {
  return options.state_dtype == StateDType::kF32 ? 1e-4 : 5e-3;
}

// o [T, Hv, V] straight from backend memory, as fp32 (for tests that move
// pages themselves, where StagedCall::Fetch's untouched-page check does not
// apply).
inline absl::StatusOr<std::vector<float>> ReadOutput(Backend& backend, const GdnOptions& options,
                                                     const GdnParams& params) {
  const size_t n = static_cast<size_t>(params.total_tokens) * options.shape.num_v_heads *
                   options.shape.head_dim_v;
  std::vector<uint8_t> bytes(n * DTypeSize(options.input_dtype));
  if (absl::Status s = backend.CopyToHost(bytes.data(), params.o, bytes.size()); !s.ok()) return s;
  if (absl::Status s = backend.Synchronize(); !s.ok()) return s;
  std::vector<float> values(n);
  ConvertToFloat(bytes.data(), options.input_dtype, n, values.data());
  return values;
}

// One state page [Hv, K, V] as fp32 (any state dtype: int8 / fp8 codes
// times their scales).
inline absl::StatusOr<std::vector<float>> ReadPage(Backend& backend, const GdnOptions& options,
                                                   const GdnParams& params, int32_t page) {
  const StatePageFormat format = StatePageFormat::For(options);
  std::vector<uint8_t> bytes(format.payload_bytes());
  const char* src = static_cast<const char*>(params.pool.base) + params.pool.page_bytes * page;
  if (absl::Status st = backend.CopyToHost(bytes.data(), src, bytes.size()); !st.ok()) return st;
  if (absl::Status st = backend.Synchronize(); !st.ok()) return st;
  return DecodeStatePage(format, bytes.data());
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    absl::StatusOr<std::unique_ptr<Backend>> backend = CreateCudaBackend(0);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
  }

  // Runs `inputs` through the cuda backend and the oracle; expects every
  // output finite and within the dtype's tolerance. Returns the worst
  // (output, state) max_abs_rel for callers that want to print it.
  std::pair<double, double> ExpectMatchesOracle(const GdnOptions& options,
                                                const oracle::Inputs& inputs,
                                                testing::EntryPoint entry,
                                                const std::string& label) {
    SCOPED_TRACE(label + " " + DescribeOptions(options));
    absl::StatusOr<testing::BackendOutputs> got =
        testing::RunOnBackend(*backend_, options, inputs, entry);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return {1e9, 1e9};
    const oracle::Outputs want = oracle::Run(options, inputs);
    EXPECT_EQ(got->o.size(), want.o.size());
    const testing::ErrorStats o_err =
        testing::Compare(got->o.data(), want.o.data(), want.o.size());
    EXPECT_EQ(o_err.nonfinite, 0) << "o: " << testing::ToString(o_err);
    EXPECT_LE(o_err.max_abs_rel, OutputTolerance(options)) << "o: " << testing::ToString(o_err);
    double worst_state = 0;
    EXPECT_EQ(got->final_states.size(), want.final_states.size());
    for (size_t i = 0; i < want.final_states.size() && i < got->final_states.size(); ++i) {
      const testing::ErrorStats s_err = testing::Compare(
          got->final_states[i].data(), want.final_states[i].data(), want.final_states[i].size());
      EXPECT_EQ(s_err.nonfinite, 0) << "state " << i << ": " << testing::ToString(s_err);
      EXPECT_LE(s_err.max_abs_rel, StateTolerance(options))
          << "state " << i << ": " << testing::ToString(s_err);
      worst_state = std::max(worst_state, s_err.max_abs_rel);
    }
    return {o_err.max_abs_rel, worst_state};
  }

  std::unique_ptr<Backend> backend_;
};

}  // namespace gdn::gpu_test

#endif  // GDN_TESTS_GPU_GPU_TEST_UTIL_H_
