// RawForwardStream (client/raw_forward_stream.h) against the fake gdn.v1
// service: pipelined requests answered in order and scanned in place, the
// route header sent once, a response's error_code returned as that status
// with the stream still usable, an id mismatch refused, a Receive with
// nothing in flight refused without blocking, a stream the server ends
// with a status returning it, a dead server UNAVAILABLE, and an unfinished
// stream torn down without hanging.
#include "client/raw_forward_stream.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/client/fake_forward_service.h"

namespace gdn::client {
namespace {

using RawForwardStreamTest = FakeForwardServiceTest;

std::unique_ptr<RawForwardStream> OpenOrDie(GdnClient& client, const RawCallOptions& options) {
  absl::StatusOr<std::unique_ptr<RawForwardStream>> stream =
      RawForwardStream::Open(client.channel(), options);
  EXPECT_TRUE(stream.ok()) << stream.status();
  return stream.ok() ? *std::move(stream) : nullptr;
}

TEST_F(RawForwardStreamTest, PipelinedRequestsAnsweredInOrderAndScannedInPlace) {
  std::unique_ptr<RawForwardStream> stream = OpenOrDie(*client_, Options());
  ASSERT_NE(stream, nullptr);
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(stream->Send(RequestBytes(id), id).ok());
  EXPECT_EQ(stream->in_flight(), 3u);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<RawForwardResponse> r = stream->Receive();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->fields.request_id, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(r->fields.o.shape, (std::vector<int64_t>{1, 3}));
    std::string o(r->fields.o.data.size, '\0');
    r->message.CopyTo(r->fields.o.data, o.data());
    EXPECT_EQ(o, "abcdef");
    EXPECT_EQ(r->fields.positions, (std::vector<int64_t>{42}));
  }
  EXPECT_EQ(stream->in_flight(), 0u);
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(stream->Finish()));
  EXPECT_EQ(service_.routes(), (std::vector<std::string>{"tenant7"}));  // once per stream
}

TEST_F(RawForwardStreamTest, ErrorCodeIsReturnedAndTheStreamStaysUsable) {
  std::unique_ptr<RawForwardStream> stream = OpenOrDie(*client_, Options());
  ASSERT_NE(stream, nullptr);
  service_.Set({grpc::StatusCode::OK, static_cast<int32_t>(absl::StatusCode::kNotFound),
                "session 'tenant7/chat-3' not found"});
  ASSERT_TRUE(stream->Send(RequestBytes(1), 1).ok());
  const absl::Status failed = stream->Receive().status();
  // The same status the typed stream gives for the same answer.
  std::unique_ptr<ForwardStream> typed = client_->OpenForwardStream();
  ASSERT_TRUE(typed->Send(Request()).ok());
  EXPECT_EQ(failed, typed->Receive().status());
  EXPECT_TRUE(absl::IsNotFound(failed)) << failed;
  EXPECT_EQ(failed.message(), "session 'tenant7/chat-3' not found");

  service_.Set({});
  ASSERT_TRUE(stream->Send(RequestBytes(2), 2).ok());
  EXPECT_TRUE(stream->Receive().ok());
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_TRUE(typed->Finish().ok());
}

TEST_F(RawForwardStreamTest, MismatchedIdAndNothingInFlightAreRefused) {
  std::unique_ptr<RawForwardStream> stream = OpenOrDie(*client_, Options());
  ASSERT_NE(stream, nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(stream->Receive().status()));  // does not block
  ASSERT_TRUE(stream->Send(RequestBytes(7), 8).ok());  // says 8, encodes 7
  const absl::Status s = stream->Receive().status();
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_NE(s.message().find("out of order"), absl::string_view::npos) << s;
  // Id 0: not checked.
  ASSERT_TRUE(stream->Send(RequestBytes(5), 0).ok());
  EXPECT_TRUE(stream->Receive().ok());
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(RawForwardStreamTest, AStreamTheServerEndsReturnsItsStatus) {
  std::unique_ptr<RawForwardStream> stream = OpenOrDie(*client_, Options());
  ASSERT_NE(stream, nullptr);
  service_.Set({grpc::StatusCode::RESOURCE_EXHAUSTED, 0, "too many streams"});
  ASSERT_TRUE(stream->Send(RequestBytes(1), 1).ok());
  const absl::Status s = stream->Receive().status();
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_EQ(s.message(), "too many streams");
  // Every later call gives the same final status; Finish returns it once.
  EXPECT_EQ(stream->Send(RequestBytes(2), 2), s);
  EXPECT_EQ(stream->Receive().status(), s);
  EXPECT_EQ(stream->Finish(), s);
  EXPECT_TRUE(absl::IsFailedPrecondition(stream->Finish()));
}

TEST_F(RawForwardStreamTest, DeadServerIsUnavailableAndUnfinishedStreamsTearDown) {
  {
    // Requests in flight, never received nor finished: the destructor
    // cancels and drains.
    std::unique_ptr<RawForwardStream> stream = OpenOrDie(*client_, Options());
    ASSERT_NE(stream, nullptr);
    service_.Set(Behaviour::Sleep(50));
    ASSERT_TRUE(stream->Send(RequestBytes(1), 1).ok());
    ASSERT_TRUE(stream->Send(RequestBytes(2), 2).ok());
  }
  server_->Shutdown();
  GdnClient dead(address_, options_);
  absl::StatusOr<std::unique_ptr<RawForwardStream>> stream =
      RawForwardStream::Open(dead.channel(), Options());
  absl::Status s = stream.status();
  if (stream.ok()) {
    s = (*stream)->Send(RequestBytes(1), 1);
    if (s.ok()) s = (*stream)->Receive().status();
  }
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
}

}  // namespace
}  // namespace gdn::client
