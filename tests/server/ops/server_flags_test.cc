// gdn-server's --device flag through ServerConfigFromFlags
// (server/ops/server_flags.cc) and ValidateDeviceFlag (server_config.h):
// the device reaches the backend config; a negative one, or one given to
// the cpu backend, is refused before anything starts (exit status 2).
#include "server/ops/server_flags.h"

#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(int32_t, device);
ABSL_DECLARE_FLAG(std::string, backend);

namespace gdn {
namespace {

using ::testing::HasSubstr;

class ServerFlagsTest : public ::testing::Test {
 protected:
  absl::FlagSaver saver_;  // every flag back to its value after each test
};

TEST_F(ServerFlagsTest, DeviceDefaultsToZero) {
  absl::StatusOr<ServerConfig> c = ServerConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backend.cuda_device, 0);
}

TEST_F(ServerFlagsTest, DeviceReachesTheBackendConfig) {
  absl::SetFlag(&FLAGS_backend, "cuda");
  absl::SetFlag(&FLAGS_device, 5);
  absl::StatusOr<ServerConfig> c = ServerConfigFromFlags();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backend.kind, BackendKind::kCuda);
  EXPECT_EQ(c->backend.cuda_device, 5);
  EXPECT_THAT(DescribeServerConfig(*c), HasSubstr("device = 5"));
}

TEST_F(ServerFlagsTest, NegativeDeviceIsRefused) {
  absl::SetFlag(&FLAGS_device, -1);
  absl::StatusOr<ServerConfig> c = ServerConfigFromFlags();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--device must be >= 0, got -1"));
}

TEST_F(ServerFlagsTest, DeviceWithTheCpuBackendIsRefused) {
  absl::SetFlag(&FLAGS_backend, "cpu");
  absl::SetFlag(&FLAGS_device, 1);
  absl::StatusOr<ServerConfig> c = ServerConfigFromFlags();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--device=1 picks a CUDA device"));
}

TEST_F(ServerFlagsTest, CpuBackendAtDeviceZeroIsFine) {
  absl::SetFlag(&FLAGS_backend, "cpu");
  EXPECT_TRUE(ServerConfigFromFlags().ok());
}

}  // namespace
}  // namespace gdn
