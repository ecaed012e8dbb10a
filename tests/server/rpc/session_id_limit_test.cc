// Every method that takes a session id refuses one over the 256-byte limit
// with INVALID_ARGUMENT and a short message (issue 21, defect 8: only
// CreateSession checked, and the others echoed the id into their error; a
// 16 KiB id then broke the call with a transport error instead).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class SessionIdLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    harness_ = std::make_unique<gdn::testing::ServerHarness>(gdn::testing::SmallServerConfig());
    ASSERT_NE(harness_->channel(), nullptr);
    harness_->CreateSession("ok");
  }

  // A call on layer 0 of one token for each of `ids`, at position 0.
  gdn::v1::ForwardRequest ForwardFor(const std::vector<std::string>& ids) {
    const GdnOptions& options = harness_->config().options;
    const oracle::Inputs inputs =
        gdn::testing::MakeRandomInputs(options, std::vector<int>(ids.size(), 1), 7, false);
    std::vector<gdn::testing::SeqSpec> specs;
    for (const std::string& id : ids) specs.push_back({id, 0});
    return gdn::testing::BuildForwardRequest(options, 0, specs, inputs);
  }

  std::vector<gdn::v1::SessionChunk> ExportOk() {
    grpc::ClientContext context;
    gdn::v1::ExportSessionRequest request;
    request.set_session_id("ok");
    auto reader = harness_->stub().ExportSession(&context, request);
    std::vector<gdn::v1::SessionChunk> chunks;
    gdn::v1::SessionChunk chunk;
    while (reader->Read(&chunk)) chunks.push_back(chunk);
    EXPECT_TRUE(reader->Finish().ok());
    return chunks;
  }

  grpc::Status Import(const std::vector<gdn::v1::SessionChunk>& chunks) {
    grpc::ClientContext context;
    gdn::v1::ImportSessionResponse imported;
    auto writer = harness_->stub().ImportSession(&context, &imported);
    for (const auto& c : chunks) {
      if (!writer->Write(c)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  std::unique_ptr<gdn::testing::ServerHarness> harness_;
};

// What a refusal must look like: the right code and no more than a short
// prefix of the id in the message.
void ExpectRefused(const grpc::StatusCode code, const std::string& message,
                   const std::string& what) {
  EXPECT_EQ(code, grpc::StatusCode::INVALID_ARGUMENT) << what << ": " << message.substr(0, 200);
  EXPECT_LT(message.size(), 200u) << what;
  EXPECT_THAT(message, Not(HasSubstr(std::string(40, 'x')))) << what;
  EXPECT_THAT(message, HasSubstr("256")) << what;
}

// Forward's ids are checked by the request reader (ReadSequences), before
// anything reaches the engine.
TEST_F(SessionIdLimitTest, ForwardRefusesLongIds) {
  for (size_t size : {size_t{300}, size_t{20} << 10}) {
    const std::string id(size, 'x');
    SCOPED_TRACE(::testing::Message() << "id of " << size << " bytes");
    {
      gdn::v1::ForwardResponse response;
      const grpc::Status s = harness_->Forward(ForwardFor({id}), &response);
      ExpectRefused(s.error_code(), s.error_message(), "Forward");
    }
    {
      // Two sequences: the long id second, so the check is per sequence.
      gdn::v1::ForwardResponse response;
      const grpc::Status s = harness_->Forward(ForwardFor({"ok", id}), &response);
      ExpectRefused(s.error_code(), s.error_message(), "Forward, second sequence");
    }
    {
      grpc::ClientContext context;
      auto stream = harness_->stub().ForwardStream(&context);
      ASSERT_TRUE(stream->Write(ForwardFor({id})));
      ASSERT_TRUE(stream->WritesDone());
      gdn::v1::ForwardResponse response;
      ASSERT_TRUE(stream->Read(&response));
      ExpectRefused(static_cast<grpc::StatusCode>(response.error_code()),
                    response.error_message(), "ForwardStream");
      EXPECT_TRUE(stream->Finish().ok());
    }
  }
  EXPECT_EQ(harness_->Describe("ok").layers(0).position(), 0);
}

TEST_F(SessionIdLimitTest, SessionMethodsRefuseLongIds) {
  for (size_t size : {size_t{300}, size_t{20} << 10}) {
    const std::string id(size, 'x');
    SCOPED_TRACE(::testing::Message() << "id of " << size << " bytes");
    {
      grpc::ClientContext context;
      gdn::v1::CreateSessionRequest request;
      request.set_session_id(id);
      gdn::v1::CreateSessionResponse response;
      const grpc::Status s = harness_->stub().CreateSession(&context, request, &response);
      ExpectRefused(s.error_code(), s.error_message(), "CreateSession");
    }
    {
      grpc::ClientContext context;
      gdn::v1::DescribeSessionRequest request;
      request.set_session_id(id);
      gdn::v1::DescribeSessionResponse response;
      const grpc::Status s = harness_->stub().DescribeSession(&context, request, &response);
      ExpectRefused(s.error_code(), s.error_message(), "DescribeSession");
    }
    {
      grpc::ClientContext context;
      gdn::v1::CloseSessionRequest request;
      request.set_session_id(id);
      gdn::v1::CloseSessionResponse response;
      const grpc::Status s = harness_->stub().CloseSession(&context, request, &response);
      ExpectRefused(s.error_code(), s.error_message(), "CloseSession");
    }
    for (bool long_parent : {true, false}) {
      grpc::ClientContext context;
      gdn::v1::ForkSessionRequest request;
      request.set_parent_id(long_parent ? id : "ok");
      request.set_child_id(long_parent ? "child" : id);
      gdn::v1::ForkSessionResponse response;
      const grpc::Status s = harness_->stub().ForkSession(&context, request, &response);
      ExpectRefused(s.error_code(), s.error_message(),
                    long_parent ? "ForkSession parent" : "ForkSession child");
    }
    {
      grpc::ClientContext context;
      gdn::v1::ExportSessionRequest request;
      request.set_session_id(id);
      auto reader = harness_->stub().ExportSession(&context, request);
      gdn::v1::SessionChunk chunk;
      EXPECT_FALSE(reader->Read(&chunk));
      const grpc::Status s = reader->Finish();
      ExpectRefused(s.error_code(), s.error_message(), "ExportSession");
    }
    std::vector<gdn::v1::SessionChunk> chunks = ExportOk();
    ASSERT_GE(chunks.size(), 2u);
    {  // The first chunk names the session.
      std::vector<gdn::v1::SessionChunk> bad = chunks;
      for (auto& c : bad) c.set_session_id(id);
      const grpc::Status s = Import(bad);
      ExpectRefused(s.error_code(), s.error_message(), "ImportSession, first chunk");
    }
    {  // A later chunk naming another (long) session.
      std::vector<gdn::v1::SessionChunk> bad = chunks;
      for (auto& c : bad) c.set_session_id("imported");
      bad.back().set_session_id(id);
      const grpc::Status s = Import(bad);
      ExpectRefused(s.error_code(), s.error_message(), "ImportSession, later chunk");
    }
  }
  // Nothing was created along the way.
  grpc::ClientContext context;
  gdn::v1::ListSessionsResponse list;
  ASSERT_TRUE(
      harness_->stub().ListSessions(&context, gdn::v1::ListSessionsRequest(), &list).ok());
  EXPECT_THAT(list.session_ids(), ::testing::ElementsAre("ok"));
}

}  // namespace
}  // namespace gdn
