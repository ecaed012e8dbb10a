// Imported state values, through the whole in-process server (issue 21,
// defect 3): ImportSession and a --snapshot_dir restore refuse a state
// holding a NaN, an infinity or a value beyond 1e30 (INVALID_ARGUMENT /
// DATA_LOSS naming the layer and the element), import nothing, and a good
// session next to it is unaffected.
#include "server/sessions/state_values.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "proto/session_file.h"
#include "server/sessions/session_snapshot_dir.h"
#include "server/sessions/session_transfer.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"
#include "tests/server/temp_dir.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;
using gdn::testing::ServerHarness;

class StateValuesTest : public ::testing::Test {
 protected:
  ServerConfig Config() {
    ServerConfig c = gdn::testing::SmallServerConfig();
    c.snapshot_dir = dir_.path();
    c.drain_timeout = absl::Seconds(2);
    return c;
  }

  // Creates `id` and runs `tokens` tokens on layer 0 so it has a state.
  void CreateWithState(ServerHarness& h, const std::string& id, int tokens) {
    h.CreateSession(id);
    const GdnOptions& options = h.config().options;
    const oracle::Inputs inputs = gdn::testing::MakeRandomInputs(options, {tokens}, 11, false);
    gdn::v1::ForwardResponse response;
    ASSERT_TRUE(
        h.Forward(gdn::testing::BuildForwardRequest(options, 0, {{id, 0}}, inputs), &response)
            .ok());
  }

  std::vector<gdn::v1::SessionChunk> Export(ServerHarness& h, const std::string& id) {
    grpc::ClientContext context;
    gdn::v1::ExportSessionRequest request;
    request.set_session_id(id);
    auto reader = h.stub().ExportSession(&context, request);
    std::vector<gdn::v1::SessionChunk> chunks;
    gdn::v1::SessionChunk chunk;
    while (reader->Read(&chunk)) chunks.push_back(chunk);
    EXPECT_TRUE(reader->Finish().ok());
    return chunks;
  }

  grpc::Status Import(ServerHarness& h, const std::vector<gdn::v1::SessionChunk>& chunks) {
    grpc::ClientContext context;
    gdn::v1::ImportSessionResponse imported;
    auto writer = h.stub().ImportSession(&context, &imported);
    for (const auto& c : chunks) {
      if (!writer->Write(c)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  gdn::testing::TempDir dir_{"gdn_state_values_test"};
};

// Writes fp32 `value` as element `element` of layer 0's state in `chunks`
// (whichever piece holds it).
void Poke(std::vector<gdn::v1::SessionChunk>* chunks, size_t element, float value) {
  const int64_t at = static_cast<int64_t>(element * sizeof(float));
  for (gdn::v1::SessionChunk& c : *chunks) {
    if (c.layer() != 0 || at < c.offset() ||
        at >= c.offset() + static_cast<int64_t>(c.data().size())) {
      continue;
    }
    std::memcpy(&(*c.mutable_data())[at - c.offset()], &value, sizeof(value));
    return;
  }
  ADD_FAILURE() << "no piece holds element " << element;
}

TEST_F(StateValuesTest, ImportRefusesNonFiniteAndHugeStates) {
  ServerHarness h(gdn::testing::SmallServerConfig());
  CreateWithState(h, "source", 5);
  const std::vector<gdn::v1::SessionChunk> good = Export(h, "source");
  ASSERT_FALSE(good.empty());
  const float inf = std::numeric_limits<float>::infinity();
  // [Hv 4, K 64, V 64]: element 8197 is head 2, k 0, v 5.
  for (float bad : {std::nanf(""), inf, -inf, 2e30f}) {
    SCOPED_TRACE(::testing::Message() << "value " << bad);
    std::vector<gdn::v1::SessionChunk> chunks = good;
    for (auto& c : chunks) c.set_session_id("poisoned");
    Poke(&chunks, 8197, bad);
    const grpc::Status s = Import(h, chunks);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("layer 0"));
    EXPECT_THAT(s.error_message(), HasSubstr("element 8197 (head 2, k 0, v 5)"));
    grpc::ClientContext context;
    gdn::v1::DescribeSessionRequest request;
    request.set_session_id("poisoned");
    gdn::v1::DescribeSessionResponse described;
    EXPECT_EQ(h.stub().DescribeSession(&context, request, &described).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  std::vector<gdn::v1::SessionChunk> chunks = good;
  for (auto& c : chunks) c.set_session_id("fine");
  Poke(&chunks, 8197, 1e30f);  // at the bound: a state like any other
  const grpc::Status s = Import(h, chunks);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(h.Describe("fine").layers(0).position(), 5);
}

TEST_F(StateValuesTest, SnapshotRestoreRejectsNonFiniteStatesAsDataLoss) {
  const ServerConfig config = Config();
  {
    ServerHarness a(config);
    CreateWithState(a, "nan-state", 3);
    CreateWithState(a, "good", 3);
    a.server().Shutdown();
    ASSERT_EQ(a.server().drain_report().written, 2);
  }
  // A NaN written into the file's state, the file otherwise intact (its
  // chunks re-encoded, so only the value check can catch it).
  const std::string path =
      absl::StrCat(dir_.path(), "/", EscapeSessionId("nan-state"), kSnapshotSuffix);
  absl::StatusOr<std::vector<gdn::v1::SessionChunk>> chunks = wire::ReadSessionFile(path);
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  Poke(&*chunks, 70, std::nanf(""));  // head 0, k 1, v 6
  ASSERT_TRUE(wire::WriteSessionFile(path, *chunks).ok());

  ServerHarness b(config);
  gdn::v1::DescribeSessionResponse described;
  {
    grpc::ClientContext context;
    gdn::v1::DescribeSessionRequest request;
    request.set_session_id("nan-state");
    const grpc::Status s = b.stub().DescribeSession(&context, request, &described);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("layer 0"));
    EXPECT_THAT(s.error_message(), HasSubstr("element 70 (head 0, k 1, v 6)"));
    EXPECT_THAT(s.error_message(), HasSubstr(".rejected"));
  }
  {
    grpc::ClientContext context;
    gdn::v1::DescribeSessionRequest request;
    request.set_session_id("nan-state");
    EXPECT_EQ(b.stub().DescribeSession(&context, request, &described).error_code(),
              grpc::StatusCode::NOT_FOUND);  // nothing imported, file set aside
  }
  EXPECT_EQ(b.Describe("good").layers(0).position(), 3);
}

}  // namespace
}  // namespace gdn
