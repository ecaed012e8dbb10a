// The cuda backend's memory and stream operations, and its refusals
// (kernels/cuda/cuda_backend.cc). Operator numerics: recurrent_kernel_test.
#include "kernels/cuda/cuda_backend.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {

TEST(CudaDeviceAvailable, AgreesWithCreateCudaBackend) {
  // Runs everywhere (CI has no GPU): no crash, no output, consistent answer.
  const bool available = CudaDeviceAvailable();
  const auto backend = CreateCudaBackend(0);
  EXPECT_EQ(backend.ok(), available) << backend.status();
  if (!available) {
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable) << backend.status();
  }
}

TEST_F(CudaBackendTest, DescribesTheDevice) {
  EXPECT_EQ(backend_->name(), "cuda");
  EXPECT_NE(backend_->device_description().find("sm_"), std::string::npos)
      << backend_->device_description();
  const DeviceMemoryInfo info = backend_->MemoryInfo();
  EXPECT_GT(info.total_bytes, 0u);
  EXPECT_LE(info.used_bytes, info.total_bytes);
}

TEST_F(CudaBackendTest, CopiesRoundTripRandomBytes) {
  std::mt19937_64 rng(FreshSeed());
  const size_t bytes = (1 << 20) + 37;
  std::vector<uint8_t> data(bytes), back(bytes, 0);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  auto a = backend_->Allocate(bytes);
  auto b = backend_->Allocate(bytes);
  auto pinned = backend_->AllocateHost(bytes);
  ASSERT_TRUE(a.ok() && b.ok() && pinned.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % 256, 0u);
  std::memcpy(*pinned, data.data(), bytes);
  ASSERT_TRUE(backend_->CopyToDevice(*a, *pinned, bytes).ok());
  ASSERT_TRUE(backend_->CopyOnDevice(*b, *a, bytes).ok());
  ASSERT_TRUE(backend_->CopyToHost(back.data(), *b, bytes).ok());
  ASSERT_TRUE(backend_->Synchronize().ok());
  EXPECT_EQ(back, data);
  backend_->Free(*a);
  backend_->Free(*b);
  backend_->FreeHost(*pinned);
}

TEST_F(CudaBackendTest, AllocationFailureIsAStatus) {
  auto huge = backend_->Allocate(size_t{1} << 50);  // 1 PiB
  EXPECT_FALSE(huge.ok());
  // The backend still works afterwards.
  auto small = backend_->Allocate(1024);
  ASSERT_TRUE(small.ok()) << small.status();
  backend_->Free(*small);
}

TEST_F(CudaBackendTest, SupportsTheOptionGridAndNamesWhatItRefuses) {
  GdnOptions options;
  for (int k : {64, 128})
    for (int v : {64, 128})
      for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
        options.shape.head_dim_k = k;
        options.shape.head_dim_v = v;
        options.state_dtype = st;
        EXPECT_TRUE(backend_->Supports(options).ok()) << DescribeOptions(options);
      }
  options.shape.head_dim_k = 96;
  const absl::Status refused = backend_->Supports(options);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("head_dim_k"), absl::string_view::npos) << refused;
}

}  // namespace
}  // namespace gdn::gpu_test
