// --snapshot_dir with real in-process servers sharing one directory: a drain
// writes every session, another server restores it on first use and
// continues bit for bit, draining refuses new calls, two servers race for
// one file, bad files are kept as .rejected. (The file names and the atomic
// write alone: session_snapshot_dir_names_test.cc; the drain gate:
// drain_gate_test.cc; the file codec: tests/proto/session_file_test.cc.)
#include "server/sessions/session_snapshot_dir.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "proto/session_file.h"
#include "server/sessions/session_transfer.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"
#include "tests/server/temp_dir.h"
#include "tests/server/test_random.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using gdn::testing::BuildForwardRequest;
using gdn::testing::MakeRandomInputs;
using gdn::testing::ServerHarness;
using gdn::testing::TempDir;

class SnapshotDirServerTest : public ::testing::Test {
 protected:
  void SetUp() override { seed_ = gdn::testing::FreshSeed(); }

  ServerConfig Config(bool with_dir = true) {
    ServerConfig c = gdn::testing::SmallServerConfig();
    if (with_dir) c.snapshot_dir = dir_.path();
    c.drain_timeout = absl::Seconds(2);
    return c;
  }

  // A random request of `tokens` tokens for (id, layer) at `position`; the
  // same (layer, position, tokens, salt) gives the same inputs.
  gdn::v1::ForwardRequest Request(const std::string& id, int layer,
                                  int64_t position, int tokens, int salt = 0) {
    const GdnOptions options = gdn::testing::SmallServerConfig().options;
    const oracle::Inputs inputs = MakeRandomInputs(
        options, {tokens},
        seed_ + 1000003ull * layer + 7919ull * position + 31ull * salt, false);
    return BuildForwardRequest(options, layer, {{id, position}}, inputs);
  }

  grpc::Status Forward(ServerHarness& h, const std::string& id, int layer,
                       int64_t position, int tokens,
                       gdn::v1::ForwardResponse* response = nullptr,
                       int salt = 0) {
    gdn::v1::ForwardResponse ignored;
    return h.Forward(Request(id, layer, position, tokens, salt),
                     response != nullptr ? response : &ignored);
  }

  grpc::Status Create(ServerHarness& h, const std::string& id) {
    grpc::ClientContext context;
    gdn::v1::CreateSessionRequest request;
    request.set_session_id(id);
    gdn::v1::CreateSessionResponse response;
    return h.stub().CreateSession(&context, request, &response);
  }

  grpc::Status Describe(ServerHarness& h, const std::string& id,
                        gdn::v1::DescribeSessionResponse* response) {
    grpc::ClientContext context;
    gdn::v1::DescribeSessionRequest request;
    request.set_session_id(id);
    return h.stub().DescribeSession(&context, request, response);
  }

  std::vector<std::string> List(ServerHarness& h) {
    grpc::ClientContext context;
    gdn::v1::ListSessionsRequest request;
    gdn::v1::ListSessionsResponse response;
    EXPECT_TRUE(h.stub().ListSessions(&context, request, &response).ok());
    return {response.session_ids().begin(), response.session_ids().end()};
  }

  SessionSnapshotDir& DirFor(const ServerConfig& config) {
    if (dir_reader_ == nullptr) {
      dir_reader_ = *SessionSnapshotDir::Open(
          dir_.path(), MakeLayerConfig(config.num_layers, config.options), 0,
          nullptr);
    }
    return *dir_reader_;
  }

  // Decodes a drained file exactly as ImportSession would.
  absl::StatusOr<SessionStates> ReadBack(const ServerConfig& config,
                                         const std::string& id,
                                         size_t page_bytes) {
    absl::StatusOr<std::vector<v1::SessionChunk>> chunks =
        wire::ReadSessionFile(DirFor(config).PathFor(id));
    if (!chunks.ok()) return chunks.status();
    ImportAssembler assembler(
        MakeLayerConfig(config.num_layers, config.options), page_bytes);
    for (const auto& c : *chunks) {
      if (absl::Status s = assembler.Add(c); !s.ok()) return s;
    }
    return assembler.Finish();
  }

  uint64_t seed_ = 0;
  TempDir dir_{"gdn_snapshot_dir_test"};
  std::unique_ptr<SessionSnapshotDir> dir_reader_;
};

TEST_F(SnapshotDirServerTest, DrainWritesOneDecodableFilePerSession) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const ServerConfig config = Config();
  const std::vector<std::string> ids = {"a", "b/c", "..", "\xc3\xbc-1",
                                        std::string(256, 'L')};
  size_t page_bytes = 0;
  {
    ServerHarness a(config);
    page_bytes = a.server().engine_info().layout.page_bytes;
    for (const std::string& id : ids) ASSERT_TRUE(Create(a, id).ok()) << id;
    ASSERT_TRUE(Forward(a, "a", 0, 0, 5).ok());
    ASSERT_TRUE(Forward(a, "b/c", 1, 0, 70).ok());  // chunked prefill
    a.server().Shutdown();
    EXPECT_EQ(a.server().drain_report().written, static_cast<int>(ids.size()));
    EXPECT_EQ(a.server().drain_report().failed, 0);
  }
  const std::vector<std::string> files = dir_.NamesEndingIn(".gdnsnap");
  EXPECT_EQ(files.size(), ids.size());
  EXPECT_EQ(dir_.Names().size(), ids.size());  // no .tmp left behind
  for (const std::string& id : ids) {
    SCOPED_TRACE(id);
    absl::StatusOr<SessionStates> states = ReadBack(config, id, page_bytes);
    ASSERT_TRUE(states.ok()) << states.status();
    EXPECT_EQ(states->session_id, id);
    ASSERT_EQ(states->layers.size(), 2u);
    const int64_t want0 = id == "a" ? 5 : 0;
    const int64_t want1 = id == "b/c" ? 70 : 0;
    EXPECT_EQ(states->layers[0].position, want0);
    EXPECT_EQ(states->layers[1].position, want1);
    EXPECT_EQ(states->layers[0].bytes.size(), want0 ? page_bytes : 0u);
  }
}

TEST_F(SnapshotDirServerTest, AnotherServerRestoresOnFirstForwardBitForBit) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  ServerHarness reference(Config(/*with_dir=*/false));
  ASSERT_TRUE(Create(reference, "mover").ok());
  {
    ServerHarness a(Config());
    ASSERT_TRUE(Create(a, "mover").ok());
    for (ServerHarness* h : {&a, &reference}) {
      ASSERT_TRUE(Forward(*h, "mover", 0, 0, 20).ok());
      ASSERT_TRUE(Forward(*h, "mover", 1, 0, 7).ok());
    }
    a.server().Shutdown();
  }
  ASSERT_EQ(dir_.NamesEndingIn(".gdnsnap").size(), 1u);

  ServerHarness b(Config());
  EXPECT_TRUE(List(b).empty());  // files are not listed
  gdn::v1::ForwardResponse moved, stayed;
  ASSERT_TRUE(Forward(b, "mover", 0, 20, 4, &moved).ok());
  ASSERT_TRUE(Forward(reference, "mover", 0, 20, 4, &stayed).ok());
  EXPECT_EQ(moved.positions(0), 24);
  EXPECT_EQ(moved.o().data(), stayed.o().data());  // bitwise
  ASSERT_TRUE(Forward(b, "mover", 1, 7, 1, &moved).ok());
  ASSERT_TRUE(Forward(reference, "mover", 1, 7, 1, &stayed).ok());
  EXPECT_EQ(moved.o().data(), stayed.o().data());
  EXPECT_TRUE(dir_.Names().empty());  // the claimed file is gone
  const gdn::v1::DescribeSessionResponse d = b.Describe("mover");
  ASSERT_EQ(d.layers_size(), 2);
  EXPECT_EQ(d.layers(0).position(), 24);
  EXPECT_EQ(d.layers(1).position(), 8);

  const std::string body = gdn::testing::ScrapeMetrics(b.server().metrics_port());
  EXPECT_EQ(gdn::testing::MetricValue(
                body, "gdn_snapshot_sessions_restored_total", {}),
            1);
  EXPECT_EQ(gdn::testing::MetricValue(
                body, "gdn_snapshot_restore_failures_total", {}),
            0);
}

TEST_F(SnapshotDirServerTest, SessionCommandsRestoreAndCreateSeesTheFile) {
  {
    ServerHarness a(Config());
    for (const char* id : {"d", "f", "e", "c"}) ASSERT_TRUE(Create(a, id).ok());
    ASSERT_TRUE(Forward(a, "d", 0, 0, 3).ok());
    ASSERT_TRUE(Forward(a, "f", 1, 0, 2).ok());
    a.server().Shutdown();
  }
  ServerHarness b(Config());
  // CreateSession must not shadow a session waiting in the directory.
  const grpc::Status created = Create(b, "d");
  EXPECT_EQ(created.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(created.error_message(), HasSubstr("snapshot"));
  // DescribeSession restores.
  gdn::v1::DescribeSessionResponse described;
  ASSERT_TRUE(Describe(b, "d", &described).ok());
  EXPECT_EQ(described.layers(0).position(), 3);
  EXPECT_EQ(Create(b, "d").error_code(), grpc::StatusCode::ALREADY_EXISTS);
  // ForkSession restores its parent; a child id held by a file is taken.
  {
    grpc::ClientContext context;
    gdn::v1::ForkSessionRequest request;
    request.set_parent_id("f");
    request.set_child_id("e");
    gdn::v1::ForkSessionResponse response;
    EXPECT_EQ(b.stub().ForkSession(&context, request, &response).error_code(),
              grpc::StatusCode::ALREADY_EXISTS);
  }
  {
    grpc::ClientContext context;
    gdn::v1::ForkSessionRequest request;
    request.set_parent_id("f");
    request.set_child_id("f2");
    gdn::v1::ForkSessionResponse response;
    ASSERT_TRUE(b.stub().ForkSession(&context, request, &response).ok());
    EXPECT_EQ(b.Describe("f2").layers(1).position(), 2);
  }
  // ExportSession restores.
  {
    grpc::ClientContext context;
    gdn::v1::ExportSessionRequest request;
    request.set_session_id("e");
    auto reader = b.stub().ExportSession(&context, request);
    gdn::v1::SessionChunk chunk;
    int chunks = 0;
    while (reader->Read(&chunk)) ++chunks;
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_EQ(chunks, 2);
  }
  // CloseSession restores, then closes: the file is consumed.
  {
    grpc::ClientContext context;
    gdn::v1::CloseSessionRequest request;
    request.set_session_id("c");
    gdn::v1::CloseSessionResponse response;
    EXPECT_TRUE(b.stub().CloseSession(&context, request, &response).ok());
  }
  EXPECT_TRUE(dir_.Names().empty());
  std::vector<std::string> listed = List(b);
  std::sort(listed.begin(), listed.end());
  EXPECT_THAT(listed, ::testing::ElementsAre("d", "e", "f", "f2"));
  // Unknown ids stay NOT_FOUND.
  gdn::v1::DescribeSessionResponse none;
  EXPECT_EQ(Describe(b, "nobody", &none).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Forward(b, "nobody", 0, 0, 1).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(SnapshotDirServerTest, DrainingRefusesNewCallsAndChangesNothing) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  ServerConfig config = Config();
  config.drain_timeout = absl::Seconds(2);
  ServerHarness a(config);
  const size_t page_bytes = a.server().engine_info().layout.page_bytes;
  ASSERT_TRUE(Create(a, "p").ok());
  ASSERT_TRUE(Forward(a, "p", 0, 0, 4).ok());
  // A call ahead of the stored position parks (holding the drain up) until
  // drain_timeout; then it fails UNAVAILABLE, unapplied.
  grpc::Status parked_status;
  std::thread parked([&] { parked_status = Forward(a, "p", 0, 10, 2); });
  absl::SleepFor(absl::Milliseconds(500));  // it reaches the engine and parks
  std::thread drain([&] { a.server().Shutdown(); });
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (gdn::testing::HealthCheck(*a.channel(), "") == 1 &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  // Draining: the listener still answers, every new session call is refused.
  const grpc::Status forward = Forward(a, "p", 0, 4, 6);  // would fill the gap
  EXPECT_EQ(forward.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(forward.error_message(), HasSubstr("draining"));
  EXPECT_EQ(Create(a, "q").error_code(), grpc::StatusCode::UNAVAILABLE);
  gdn::v1::DescribeSessionResponse d;
  EXPECT_EQ(Describe(a, "p", &d).error_code(), grpc::StatusCode::UNAVAILABLE);
  {  // ForwardStream answers the message UNAVAILABLE and stays open.
    grpc::ClientContext context;
    auto stream = a.stub().ForwardStream(&context);
    ASSERT_TRUE(stream->Write(Request("p", 0, 4, 6)));
    gdn::v1::ForwardResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.error_code(),
              static_cast<int32_t>(grpc::StatusCode::UNAVAILABLE));
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  drain.join();
  parked.join();
  EXPECT_EQ(parked_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(parked_status.error_message(), HasSubstr("draining"));
  EXPECT_EQ(a.server().drain_report().written, 1);

  absl::StatusOr<SessionStates> states = ReadBack(config, "p", page_bytes);
  ASSERT_TRUE(states.ok()) << states.status();
  EXPECT_EQ(states->layers[0].position, 4);  // nothing applied while draining
  EXPECT_EQ(states->layers[1].position, 0);
  EXPECT_FALSE(dir_.NamesEndingIn(".gdnsnap").empty());
}

TEST_F(SnapshotDirServerTest, TwoServersRacingForOneFileRestoreItOnce) {
  constexpr int kRounds = 4;
  {
    ServerHarness a(Config());
    for (int i = 0; i < kRounds; ++i) {
      const std::string id = "race" + std::to_string(i);
      ASSERT_TRUE(Create(a, id).ok());
      ASSERT_TRUE(Forward(a, id, 0, 0, 3).ok());
    }
    a.server().Shutdown();
  }
  ServerHarness b(Config()), c(Config());
  for (int i = 0; i < kRounds; ++i) {
    const std::string id = "race" + std::to_string(i);
    std::atomic<bool> go{false};
    grpc::Status sb, sc;
    std::thread tb([&] {
      while (!go) {
      }
      sb = Forward(b, id, 0, 3, 2);
    });
    std::thread tc([&] {
      while (!go) {
      }
      sc = Forward(c, id, 0, 3, 2);
    });
    go = true;
    tb.join();
    tc.join();
    SCOPED_TRACE(id + ": b " + sb.error_message() + ", c " +
                 sc.error_message());
    EXPECT_NE(sb.ok(), sc.ok());  // exactly one restored it
    const grpc::Status& lost = sb.ok() ? sc : sb;
    EXPECT_EQ(lost.error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_TRUE(dir_.Names().empty());  // nothing left claimed or rejected
  EXPECT_EQ(List(b).size() + List(c).size(), static_cast<size_t>(kRounds));
}

TEST_F(SnapshotDirServerTest, DamagedFilesAreRejectedKeptAndCreateNothing) {
  ServerConfig config = Config();
  {
    ServerHarness a(config);
    for (const char* id : {"trunc", "garbage", "wrong-id"}) {
      ASSERT_TRUE(Create(a, id).ok());
      ASSERT_TRUE(Forward(a, id, 0, 0, 3).ok());
    }
    a.server().Shutdown();
  }
  SessionSnapshotDir& dir = DirFor(config);
  const std::string trunc = dir.PathFor("trunc");
  fs::resize_file(trunc, fs::file_size(trunc) / 2);
  { std::ofstream(dir.PathFor("garbage"), std::ios::trunc) << "not a snapshot"; }
  fs::rename(dir.PathFor("wrong-id"), dir.PathFor("renamed"));

  ServerHarness b(config);
  struct Case {
    std::string id;
    grpc::StatusCode code;
  };
  for (const Case& c : {Case{"trunc", grpc::StatusCode::DATA_LOSS},
                        Case{"garbage", grpc::StatusCode::DATA_LOSS},
                        Case{"renamed", grpc::StatusCode::DATA_LOSS}}) {
    SCOPED_TRACE(c.id);
    const grpc::Status s = Forward(b, c.id, 0, 3, 1);
    EXPECT_EQ(s.error_code(), c.code) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(".rejected"));
    EXPECT_THAT(s.error_message(), HasSubstr(c.id));
    // No session was created, and the file is gone from the restore path.
    gdn::v1::DescribeSessionResponse d;
    EXPECT_EQ(Describe(b, c.id, &d).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_TRUE(List(b).empty());
  EXPECT_TRUE(dir_.NamesEndingIn(".gdnsnap").empty());
  EXPECT_EQ(dir_.NamesEndingIn(".rejected").size(), 3u);  // kept, not deleted
  EXPECT_EQ(dir_.Names().size(), 3u);
  const std::string body = gdn::testing::ScrapeMetrics(b.server().metrics_port());
  EXPECT_EQ(gdn::testing::MetricValue(
                body, "gdn_snapshot_restore_failures_total", {}),
            3);
}

TEST_F(SnapshotDirServerTest, LayerConfigMismatchIsRejectedAndKept) {
  {
    ServerHarness a(Config());
    ASSERT_TRUE(Create(a, "cfg").ok());
    ASSERT_TRUE(Forward(a, "cfg", 0, 0, 2).ok());
    a.server().Shutdown();
  }
  ServerConfig other = Config();
  other.num_layers = 3;
  ServerHarness b(other);
  gdn::v1::DescribeSessionResponse d;
  const grpc::Status s = Describe(b, "cfg", &d);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("num_layers"));
  EXPECT_THAT(s.error_message(), HasSubstr(".rejected"));
  EXPECT_TRUE(List(b).empty());
  EXPECT_EQ(dir_.NamesEndingIn(".rejected").size(), 1u);
  EXPECT_TRUE(dir_.NamesEndingIn(".gdnsnap").empty());
}

TEST_F(SnapshotDirServerTest, WithoutSnapshotDirNothingChanges) {
  ServerHarness a(Config(/*with_dir=*/false));
  ASSERT_TRUE(Create(a, "kept").ok());
  ASSERT_TRUE(Forward(a, "kept", 0, 0, 2).ok());
  EXPECT_EQ(Forward(a, "unknown", 0, 0, 1).error_code(),
            grpc::StatusCode::NOT_FOUND);
  a.server().Shutdown();
  EXPECT_EQ(a.server().drain_report().written, 0);
  EXPECT_TRUE(dir_.Names().empty());
}

TEST_F(SnapshotDirServerTest, AnUnusableDirectoryFailsStart) {
  const std::string file = dir_.path() + "/plain-file";
  { std::ofstream(file) << "x"; }
  ServerConfig config = Config();
  config.snapshot_dir = file;
  absl::StatusOr<std::unique_ptr<GdnServer>> server = GdnServer::Start(config);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("not a directory"));
  // A missing last component is created.
  config.snapshot_dir = dir_.path() + "/made";
  server = GdnServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(fs::is_directory(config.snapshot_dir));
}

}  // namespace
}  // namespace gdn
