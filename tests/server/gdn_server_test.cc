// GdnServer's drain, in-process (issue 21, defect 5): a drain that cannot
// write its sessions to --snapshot_dir reports them lost (sessions_lost(),
// which gdn-server turns into a non-zero exit status, and
// gdn_snapshot_write_failures_total); a drain that wrote everything reports
// none. The exit status itself: tests/client/e2e/ops_e2e_test.cc.
#include "server/gdn_server.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "tests/server/server_harness.h"
#include "tests/server/temp_dir.h"

namespace gdn {
namespace {

using gdn::testing::ServerHarness;

class GdnServerDrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = gdn::testing::SmallServerConfig();
    config_.snapshot_dir = base_.path() + "/snapshots";
    config_.drain_timeout = absl::Seconds(2);
  }

  static double WriteFailures(const GdnServer& server) {
    const std::string body =
        prometheus::TextSerializer().Serialize(server.metrics().registry()->Collect());
    return gdn::testing::MetricValue(body, "gdn_snapshot_write_failures_total", {});
  }

  gdn::testing::TempDir base_{"gdn_server_test"};
  ServerConfig config_;
};

TEST_F(GdnServerDrainTest, ADrainThatCannotWriteReportsEverySessionLost) {
  ServerHarness h(config_);
  for (const char* id : {"a", "b", "c"}) h.CreateSession(id);
  // The directory becomes a plain file: every write fails (ENOTDIR, for
  // root too).
  ASSERT_EQ(std::rename(config_.snapshot_dir.c_str(), (base_.path() + "/moved").c_str()), 0);
  { std::ofstream(config_.snapshot_dir) << "not a directory"; }
  h.server().Shutdown();
  EXPECT_EQ(h.server().drain_report().written, 0);
  EXPECT_EQ(h.server().drain_report().failed, 3);
  EXPECT_EQ(h.server().sessions_lost(), 3);
  EXPECT_EQ(WriteFailures(h.server()), 3);
}

TEST_F(GdnServerDrainTest, ADrainThatWritesEverythingLosesNothing) {
  ServerHarness h(config_);
  for (const char* id : {"a", "b"}) h.CreateSession(id);
  h.server().Shutdown();
  EXPECT_EQ(h.server().drain_report().written, 2);
  EXPECT_EQ(h.server().sessions_lost(), 0);
  EXPECT_EQ(WriteFailures(h.server()), 0);
}

TEST_F(GdnServerDrainTest, WithoutSnapshotDirNothingIsReportedLost) {
  config_.snapshot_dir.clear();
  ServerHarness h(config_);
  h.CreateSession("a");
  h.server().Shutdown();
  EXPECT_EQ(h.server().sessions_lost(), 0);
}

}  // namespace
}  // namespace gdn
