// The cuda backend's side of same-host regions: CheckValues finds the first
// bad element of every range at awkward sizes and positions (not finite, or
// out of range, in fp32 / bf16 / fp16), host memory registers and is copied
// from through its device address, and a bad IPC handle is refused without
// hurting the context.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/dtype_convert.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn {
namespace {

// backend_: the cuda backend (gpu_test_util.h; skips without a device).
class CudaRegionsTest : public gpu_test::CudaBackendTest {
 protected:
  // `n` fp32 values in [-0.5, 0.5] on the device, in `dtype`.
  void* Upload(const std::vector<float>& values, DType dtype) {
    std::vector<char> bytes(values.size() * DTypeSize(dtype));
    ConvertFromFloat(values.data(), values.size(), dtype, bytes.data());
    absl::StatusOr<void*> d = backend_->Allocate(bytes.size() + 256);
    EXPECT_TRUE(d.ok());
    EXPECT_TRUE(backend_->CopyToDevice(*d, bytes.data(), bytes.size()).ok());
    EXPECT_TRUE(backend_->Synchronize().ok());
    buffers_.push_back(*d);
    return *d;
  }
  void TearDown() override {
    for (void* p : buffers_) backend_->Free(p);
  }
  std::vector<void*> buffers_;
};

TEST_F(CudaRegionsTest, CheckValuesFindsTheFirstBadElement) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<ValueCheck> checks;
  std::vector<int64_t> expected;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t n : {1, 7, 255, 4097, 300001}) {
      for (int bad : {-1, 0, 1, 2}) {  // none, nan, inf, two bad (the first counts)
        std::vector<float> v(n);
        for (float& x : v) x = u(rng);
        int64_t first = n;
        if (bad >= 0) {
          first = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
          v[first] = bad == 1 ? -inf : nan;
          if (bad == 2 && first + 1 < n) v[n - 1] = inf;
        }
        checks.push_back({Upload(v, dtype), n, dtype, false, 0, 0});
        expected.push_back(first);
      }
    }
  }
  // Ranges (fp32 g <= 0, beta in [0, 1]): an element just outside.
  for (int64_t n : {5, 70000}) {
    std::vector<float> v(n, -0.25f);
    const int64_t at = n / 3;
    v[at] = 1e-7f;
    checks.push_back({Upload(v, DType::kF32), n, DType::kF32, true,
                      -std::numeric_limits<float>::max(), 0.0f});
    expected.push_back(at);
    std::vector<float> w(n, 0.5f);
    checks.push_back({Upload(w, DType::kF32), n, DType::kF32, true, 0.0f, 1.0f});
    expected.push_back(n);  // all in range
  }
  absl::StatusOr<std::vector<int64_t>> got = backend_->CheckValues(checks);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, expected);
}

// The marks are never reset between calls (check_values.h): a failure of
// one call must not show in the next, and a later, larger index must not
// hide behind an earlier call's smaller one.
TEST_F(CudaRegionsTest, CheckValuesForgetsEarlierCalls) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> bad_early(1000, 0.5f), bad_late(1000, 0.5f), good(1000, 0.5f);
  bad_early[3] = nan;
  bad_late[900] = nan;
  const ValueCheck early{Upload(bad_early, DType::kF32), 1000, DType::kF32, false, 0, 0};
  const ValueCheck late{Upload(bad_late, DType::kF32), 1000, DType::kF32, false, 0, 0};
  const ValueCheck fine{Upload(good, DType::kF32), 1000, DType::kF32, false, 0, 0};
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<std::vector<int64_t>> a = backend_->CheckValues({early, fine});
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(*a, (std::vector<int64_t>{3, 1000}));
    absl::StatusOr<std::vector<int64_t>> b = backend_->CheckValues({fine, late});
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(*b, (std::vector<int64_t>{1000, 900}));
    absl::StatusOr<std::vector<int64_t>> c = backend_->CheckValues({late, early});
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(*c, (std::vector<int64_t>{900, 3}));
  }
}

TEST_F(CudaRegionsTest, RegisteredHostMemoryIsCopiedFromAndTo) {
  std::vector<char> host(1 << 20);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<char>(i * 131);
  absl::StatusOr<Backend::HostRegistration> reg =
      backend_->RegisterHostMemory(host.data(), host.size());
  ASSERT_TRUE(reg.ok()) << reg.status();
  ASSERT_NE(reg->device_address, nullptr);
  absl::StatusOr<void*> d = backend_->Allocate(host.size());
  ASSERT_TRUE(d.ok());
  buffers_.push_back(*d);
  absl::StatusOr<std::unique_ptr<BackendStream>> stream = backend_->CreateStream(true);
  ASSERT_TRUE(stream.ok());
  const GatherCopy in{reg->device_address + 4096, 0, 65536};
  ASSERT_TRUE((*stream)->Gather(*d, &in, nullptr, 1).ok());
  const GatherCopy out{*d, 0, 65536};
  ASSERT_TRUE((*stream)->Gather(reg->device_address + 8192, &out, nullptr, 1).ok());
  ASSERT_TRUE((*stream)->Synchronize().ok());
  for (size_t i = 0; i < 65536; ++i) {
    ASSERT_EQ(host[8192 + i], static_cast<char>((4096 + i) * 131)) << i;
  }
}

TEST_F(CudaRegionsTest, BadIpcHandlesAreRefused) {
  EXPECT_EQ(backend_->OpenIpcMemory(std::string(10, 'x'), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->OpenIpcMemory(std::string(64, '\0'), 1234).status().code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status garbage = backend_->OpenIpcMemory(std::string(64, '\x5a'), 0).status();
  EXPECT_EQ(garbage.code(), absl::StatusCode::kInvalidArgument) << garbage;
  // The context still works.
  absl::StatusOr<std::vector<int64_t>> after =
      backend_->CheckValues({{Upload({1.0f, 2.0f}, DType::kF32), 2, DType::kF32, false, 0, 0}});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ((*after)[0], 2);
}

}  // namespace
}  // namespace gdn
