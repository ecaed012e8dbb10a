// CreateBackend (kernels/backend_factory.cc) and --device: an explicit
// device never falls back to the cpu in silence, and a device that is not
// there stops the start with a message naming the flag.
#include "kernels/backend.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;

TEST(BackendFactoryTest, CpuBackendAtDeviceZero) {
  BackendConfig config;
  config.kind = BackendKind::kCpu;
  config.cpu_threads = 1;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(config);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "cpu");
}

TEST(BackendFactoryTest, AutoWithAMissingDeviceFailsNamingTheFlag) {
  BackendConfig config;
  config.kind = BackendKind::kAuto;
  config.cpu_threads = 1;
  config.cuda_device = 9;  // more GPUs than any host here has
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(config);
  ASSERT_FALSE(backend.ok()) << "auto with --device=9 started " << (*backend)->name();
  // No GPU (or no CUDA in the build): FailedPrecondition; a GPU host with
  // fewer devices: InvalidArgument, out of range.
  EXPECT_THAT(backend.status().code(),
              ::testing::AnyOf(absl::StatusCode::kFailedPrecondition,
                               absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(backend.status().message(), HasSubstr("--device=9"));
}

}  // namespace
}  // namespace gdn
