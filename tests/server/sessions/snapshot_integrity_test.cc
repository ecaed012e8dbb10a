// --snapshot_dir files and their checksums, through real in-process servers
// (issue 21, defect 4): a drained file with one flipped byte restores as
// nothing (DATA_LOSS, the file kept as .rejected) instead of as a silently
// wrong state, and a file of the first version (no checksums) still
// restores.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "proto/session_file.h"
#include "server/sessions/session_snapshot_dir.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"
#include "tests/server/temp_dir.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;
using gdn::testing::ServerHarness;

class SnapshotIntegrityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = gdn::testing::SmallServerConfig();
    config_.snapshot_dir = dir_.path();
    config_.drain_timeout = absl::Seconds(2);
  }

  // Drains a server holding `ids`, each with 4 tokens on layer 0.
  void DrainSessions(const std::vector<std::string>& ids) {
    ServerHarness a(config_);
    const GdnOptions& options = a.config().options;
    for (const std::string& id : ids) {
      a.CreateSession(id);
      const oracle::Inputs inputs = gdn::testing::MakeRandomInputs(options, {4}, 5, false);
      gdn::v1::ForwardResponse response;
      ASSERT_TRUE(
          a.Forward(gdn::testing::BuildForwardRequest(options, 0, {{id, 0}}, inputs), &response)
              .ok());
    }
    a.server().Shutdown();
    ASSERT_EQ(a.server().drain_report().written, static_cast<int>(ids.size()));
  }

  std::string PathFor(const std::string& id) const {
    return absl::StrCat(dir_.path(), "/", EscapeSessionId(id), kSnapshotSuffix);
  }

  grpc::Status Describe(ServerHarness& h, const std::string& id,
                        gdn::v1::DescribeSessionResponse* response) {
    grpc::ClientContext context;
    gdn::v1::DescribeSessionRequest request;
    request.set_session_id(id);
    return h.stub().DescribeSession(&context, request, response);
  }

  gdn::testing::TempDir dir_{"gdn_snapshot_integrity_test"};
  ServerConfig config_;
};

TEST_F(SnapshotIntegrityTest, AFlippedStateByteIsDataLossAndTheFileIsKept) {
  DrainSessions({"flipped", "intact"});
  {
    // One bit in the middle of the file: inside layer 0's state bytes (the
    // file is almost all state page).
    absl::StatusOr<std::string> bytes = wire::ReadFileBytes(PathFor("flipped"));
    ASSERT_TRUE(bytes.ok());
    (*bytes)[bytes->size() / 2] ^= 0x10;
    ASSERT_TRUE(WriteFileAtomically(PathFor("flipped"), *bytes).ok());
  }
  ServerHarness b(config_);
  gdn::v1::DescribeSessionResponse described;
  const grpc::Status s = Describe(b, "flipped", &described);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("checksum"));
  EXPECT_THAT(s.error_message(), HasSubstr(".rejected"));
  EXPECT_EQ(Describe(b, "flipped", &described).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(dir_.NamesEndingIn(".rejected").size(), 1u);
  ASSERT_TRUE(Describe(b, "intact", &described).ok());
  EXPECT_EQ(described.layers(0).position(), 4);
}

TEST_F(SnapshotIntegrityTest, AVersionOneFileStillRestores) {
  DrainSessions({"old"});
  absl::StatusOr<std::vector<gdn::v1::SessionChunk>> chunks = wire::ReadSessionFile(PathFor("old"));
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  // Rewritten as version 1 wrote it: "GDNSNAP1", varint length + chunk.
  std::string old(wire::kSessionFileMagicV1);
  for (const gdn::v1::SessionChunk& c : *chunks) {
    const std::string bytes = c.SerializeAsString();
    for (size_t n = bytes.size(); ; n >>= 7) {
      if (n < 0x80) {
        old.push_back(static_cast<char>(n));
        break;
      }
      old.push_back(static_cast<char>((n & 0x7f) | 0x80));
    }
    old += bytes;
  }
  ASSERT_TRUE(WriteFileAtomically(PathFor("old"), old).ok());

  ServerHarness b(config_);
  gdn::v1::DescribeSessionResponse described;
  const grpc::Status s = Describe(b, "old", &described);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(described.layers(0).position(), 4);
  EXPECT_TRUE(dir_.NamesEndingIn(".gdnsnap").empty());
}

}  // namespace
}  // namespace gdn
