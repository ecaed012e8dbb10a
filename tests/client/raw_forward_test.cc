// ForwardRaw (client/raw_forward.h) against an in-process fake gdn.v1
// service: a good answer is scanned in place (o's bytes, positions); errors
// come out as GdnClient gives them: a failed RPC with its gRPC status (as
// GdnClient::Forward), a response carrying error_code with that code and
// message (as GdnClient's ForwardStream::Receive), a dead server as
// UNAVAILABLE; UNAVAILABLE is retried under the policy and told to the
// observer; the route header and the deadline are sent.
#include "client/raw_forward.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client/gdn_client.h"
#include "client/routing_key.h"
#include "gtest/gtest.h"
#include "tests/client/fake_forward_service.h"

namespace gdn::client {
namespace {

using RawForwardTest = FakeForwardServiceTest;

TEST_F(RawForwardTest, AnswerIsScannedInPlace) {
  absl::StatusOr<RawForwardResponse> r = ForwardRaw(client_->channel(), RequestBytes(), Options());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->fields.o.dtype, v1::DTYPE_BF16);
  EXPECT_EQ(r->fields.o.shape, (std::vector<int64_t>{1, 3}));
  std::string o(r->fields.o.data.size, '\0');
  r->message.CopyTo(r->fields.o.data, o.data());
  EXPECT_EQ(o, "abcdef");
  EXPECT_EQ(r->fields.positions, (std::vector<int64_t>{42}));
  EXPECT_EQ(service_.routes(), (std::vector<std::string>{"tenant7"}));
}

TEST_F(RawForwardTest, FailedRpcMapsLikeGdnClient) {
  for (grpc::StatusCode code : {grpc::StatusCode::NOT_FOUND, grpc::StatusCode::INVALID_ARGUMENT,
                                grpc::StatusCode::FAILED_PRECONDITION,
                                grpc::StatusCode::RESOURCE_EXHAUSTED}) {
    service_.Set({code, 0, "expected position 7"});
    const absl::Status raw = ForwardRaw(client_->channel(), RequestBytes(), Options()).status();
    const absl::Status typed = client_->Forward(Request()).status();
    EXPECT_FALSE(raw.ok());
    EXPECT_EQ(raw, typed);
    EXPECT_EQ(raw.message(), "expected position 7");
  }
}

TEST_F(RawForwardTest, ErrorCodeInResponseMapsLikeTheStream) {
  service_.Set({grpc::StatusCode::OK, static_cast<int32_t>(absl::StatusCode::kNotFound),
                "session 'tenant7/chat-3' not found"});
  const absl::Status raw = ForwardRaw(client_->channel(), RequestBytes(), Options()).status();
  std::unique_ptr<ForwardStream> stream = client_->OpenForwardStream();
  ASSERT_TRUE(stream->Send(Request()).ok());
  const absl::Status streamed = stream->Receive().status();
  EXPECT_TRUE(absl::IsNotFound(raw)) << raw;
  EXPECT_EQ(raw, streamed);
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(RawForwardTest, UnavailableIsRetriedAndObserved) {
  service_.Set(Behaviour::UnavailableFirst(2));
  std::vector<int> attempts;
  RawCallOptions o = Options();
  o.retry.max_attempts = 5;
  o.on_retry = [&](absl::string_view method, const absl::Status& s, int attempt) {
    EXPECT_EQ(method, "Forward");
    EXPECT_TRUE(absl::IsUnavailable(s));
    attempts.push_back(attempt);
  };
  absl::StatusOr<RawForwardResponse> r = ForwardRaw(client_->channel(), RequestBytes(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(attempts, (std::vector<int>{1, 2}));
  EXPECT_EQ(service_.routes().size(), 3u);
  // No retries: the first UNAVAILABLE is the answer.
  service_.Set(Behaviour::UnavailableFirst(1));
  EXPECT_TRUE(absl::IsUnavailable(ForwardRaw(client_->channel(), RequestBytes(), Options()).status()));
}

TEST_F(RawForwardTest, DeadAndSlowServers) {
  service_.Set(Behaviour::Sleep(300));
  RawCallOptions o = Options("");
  o.deadline = absl::Milliseconds(30);
  EXPECT_TRUE(absl::IsDeadlineExceeded(ForwardRaw(client_->channel(), RequestBytes(), o).status()));
  EXPECT_EQ(service_.routes().back(), "");  // no key, no header

  server_->Shutdown();
  GdnClient dead(address_, options_);
  const absl::Status raw = ForwardRaw(dead.channel(), RequestBytes(), Options()).status();
  EXPECT_TRUE(absl::IsUnavailable(raw)) << raw;
  EXPECT_EQ(raw.code(), dead.Forward(Request()).status().code());
}

}  // namespace
}  // namespace gdn::client
