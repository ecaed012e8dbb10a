// kernels/device_topology.h over fake hosts: --device validation and the
// peer-access decision for CUDA IPC regions on another GPU of the host.
#include "kernels/device_topology.h"

#include <cstdlib>
#include <initializer_list>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// n devices; `peers` lists the (from, to) pairs with peer access.
PeerTopology FakeHost(int n, std::initializer_list<std::pair<int, int>> peers) {
  PeerTopology t;
  t.device_count = n;
  t.can_access.assign(static_cast<size_t>(n) * n, false);
  for (auto [from, to] : peers) t.can_access[static_cast<size_t>(from) * n + to] = true;
  return t;
}

// Every pair of n devices linked (an NVLink / NVSwitch host such as 8 x H200).
PeerTopology FullyLinked(int n) {
  PeerTopology t = FakeHost(n, {});
  t.can_access.assign(static_cast<size_t>(n) * n, true);
  return t;
}

class DeviceTopologyTest : public ::testing::Test {
 protected:
  // The messages name CUDA_VISIBLE_DEVICES when it is set: tests start unset.
  void SetUp() override {
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) saved_ = v, had_ = true;
    unsetenv("CUDA_VISIBLE_DEVICES");
  }
  void TearDown() override {
    if (had_) setenv("CUDA_VISIBLE_DEVICES", saved_.c_str(), 1);
  }
  std::string saved_;
  bool had_ = false;
};

TEST_F(DeviceTopologyTest, DeviceIndexInRangeIsAccepted) {
  EXPECT_TRUE(ValidateDeviceIndex(0, 1).ok());
  EXPECT_TRUE(ValidateDeviceIndex(7, 8).ok());
}

TEST_F(DeviceTopologyTest, DeviceIndexOutOfRangeNamesTheFlagAndTheCount) {
  const absl::Status s = ValidateDeviceIndex(8, 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("--device=8"), HasSubstr("sees 8 CUDA device(s)"),
                                 HasSubstr("0..7"), HasSubstr("CUDA_VISIBLE_DEVICES")));
  EXPECT_EQ(ValidateDeviceIndex(-1, 2).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(DeviceTopologyTest, DeviceIndexWithNoDeviceIsFailedPrecondition) {
  const absl::Status s = ValidateDeviceIndex(0, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("sees no CUDA device"));
}

TEST_F(DeviceTopologyTest, OutOfRangeMessageQuotesCudaVisibleDevices) {
  setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);
  EXPECT_THAT(ValidateDeviceIndex(2, 2).message(), HasSubstr("(CUDA_VISIBLE_DEVICES=2,3)"));
}

TEST_F(DeviceTopologyTest, SameDeviceNeedsNoPeerAccess) {
  const PeerTopology host = FakeHost(2, {});
  EXPECT_EQ(*DecideRegionAccess(1, 1, host), RegionAccess::kSameDevice);
  EXPECT_EQ(*DecideRegionAccess(0, 0, FakeHost(1, {})), RegionAccess::kSameDevice);
}

TEST_F(DeviceTopologyTest, PeerDeviceIsReachedWhereTheTopologyAllows) {
  const PeerTopology host = FullyLinked(8);
  for (int server = 0; server < 8; ++server) {
    for (int region = 0; region < 8; ++region) {
      absl::StatusOr<RegionAccess> a = DecideRegionAccess(server, region, host);
      ASSERT_TRUE(a.ok()) << server << " " << region << ": " << a.status();
      EXPECT_EQ(*a, server == region ? RegionAccess::kSameDevice : RegionAccess::kPeer);
    }
  }
}

TEST_F(DeviceTopologyTest, NoPeerAccessIsFailedPreconditionNamingBothDevices) {
  // Two PCIe islands: 0 <-> 1 and 2 <-> 3 linked, nothing across.
  const PeerTopology host = FakeHost(4, {{0, 1}, {1, 0}, {2, 3}, {3, 2}});
  EXPECT_EQ(*DecideRegionAccess(0, 1, host), RegionAccess::kPeer);
  EXPECT_EQ(*DecideRegionAccess(3, 2, host), RegionAccess::kPeer);
  const absl::StatusOr<RegionAccess> a = DecideRegionAccess(1, 2, host);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(a.status().message(),
              AllOf(HasSubstr("region is on device 2"), HasSubstr("runs on device 1"),
                    HasSubstr("no peer access"), HasSubstr("server that owns device 2")));
}

TEST_F(DeviceTopologyTest, PeerAccessIsDirectional) {
  // The server's device must reach the region's memory: from server to region.
  const PeerTopology host = FakeHost(2, {{0, 1}});
  EXPECT_EQ(*DecideRegionAccess(0, 1, host), RegionAccess::kPeer);
  EXPECT_EQ(DecideRegionAccess(1, 0, host).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(DeviceTopologyTest, RegionDeviceOutOfRangeIsInvalidArgument) {
  const PeerTopology host = FullyLinked(2);
  const absl::StatusOr<RegionAccess> a = DecideRegionAccess(0, 5, host);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(),
              AllOf(HasSubstr("device_id"), HasSubstr("device 5"), HasSubstr("on device 0"),
                    HasSubstr("sees 2 CUDA device(s)")));
  EXPECT_EQ(DecideRegionAccess(0, -1, host).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecideRegionAccess(2, 0, host).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(DeviceTopologyTest, CanAccessIsFalseOutsideTheTopology) {
  const PeerTopology host = FullyLinked(2);
  EXPECT_TRUE(host.CanAccess(1, 1));
  EXPECT_FALSE(host.CanAccess(0, 2));
  EXPECT_FALSE(host.CanAccess(-1, 0));
  PeerTopology short_matrix;  // a malformed description reaches nothing
  short_matrix.device_count = 2;
  EXPECT_FALSE(short_matrix.CanAccess(0, 1));
}

}  // namespace
}  // namespace gdn
