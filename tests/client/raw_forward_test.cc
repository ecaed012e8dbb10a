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
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/gdn_client.h"
#include "client/routing_key.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace gdn::client {
namespace {

// How the fake answers Forward (and each ForwardStream message).
struct Behaviour {
  static Behaviour UnavailableFirst(int n) {
    Behaviour b;
    b.unavailable_first = n;
    return b;
  }
  static Behaviour Sleep(int ms) {
    Behaviour b;
    b.sleep_ms = ms;
    return b;
  }
  grpc::StatusCode status = grpc::StatusCode::OK;  // != OK: the RPC fails with it
  int32_t error_code = 0;                          // != 0: a response carrying it
  std::string message = "boom";
  int unavailable_first = 0;                       // tries answered UNAVAILABLE first
  int sleep_ms = 0;
};

class FakeService final : public v1::GdnService::Service {
 public:
  void Set(Behaviour b) {
    absl::MutexLock lock(&mu_);
    behaviour_ = b;
  }
  std::vector<std::string> routes() {
    absl::MutexLock lock(&mu_);
    return routes_;
  }

  grpc::Status GetServerInfo(grpc::ServerContext*, const v1::ServerInfoRequest*,
                             v1::ServerInfoResponse* response) override {
    response->mutable_limits()->set_max_message_bytes(64 << 20);
    return grpc::Status::OK;
  }

  grpc::Status Forward(grpc::ServerContext* context, const v1::ForwardRequest* request,
                       v1::ForwardResponse* response) override {
    Behaviour b;
    {
      absl::MutexLock lock(&mu_);
      auto it = context->client_metadata().find(kRouteHeader);
      routes_.push_back(it == context->client_metadata().end()
                            ? ""
                            : std::string(it->second.data(), it->second.size()));
      if (behaviour_.unavailable_first > 0) {
        --behaviour_.unavailable_first;
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "draining");
      }
      b = behaviour_;
    }
    if (b.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(b.sleep_ms));
    if (b.status != grpc::StatusCode::OK) return grpc::Status(b.status, b.message);
    Answer(*request, b, response);
    return grpc::Status::OK;
  }

  grpc::Status ForwardStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::ForwardResponse, v1::ForwardRequest>* stream) override {
    v1::ForwardRequest request;
    while (stream->Read(&request)) {
      Behaviour b;
      {
        absl::MutexLock lock(&mu_);
        b = behaviour_;
      }
      v1::ForwardResponse response;
      Answer(request, b, &response);
      response.set_request_id(request.request_id());
      stream->Write(response);
    }
    return grpc::Status::OK;
  }

 private:
  // o: the 6 bytes "abcdef" as a [1, 3] bf16 tensor; positions: + tokens.
  static void Answer(const v1::ForwardRequest& request, const Behaviour& b,
                     v1::ForwardResponse* response) {
    if (b.error_code != 0) {
      response->set_error_code(b.error_code);
      response->set_error_message(b.message);
      return;
    }
    response->mutable_o()->set_dtype(v1::DTYPE_BF16);
    response->mutable_o()->add_shape(1);
    response->mutable_o()->add_shape(3);
    response->mutable_o()->set_data("abcdef");
    for (const v1::SequenceSpec& s : request.sequences()) {
      response->add_positions(s.position() + s.num_tokens());
    }
  }

  absl::Mutex mu_;
  Behaviour behaviour_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> routes_ ABSL_GUARDED_BY(mu_);
};

class RawForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
    options_.retry.max_attempts = 1;
    options_.retry.initial_backoff = absl::Milliseconds(1);
    client_ = std::make_unique<GdnClient>(address_, options_);
  }
  void TearDown() override { server_->Shutdown(); }

  static v1::ForwardRequest Request() {
    v1::ForwardRequest r;
    r.set_layer(1);
    v1::SequenceSpec* s = r.add_sequences();
    s->set_session_id("tenant7/chat-3");
    s->set_position(40);
    s->set_num_tokens(2);
    return r;
  }
  static grpc::ByteBuffer RequestBytes() {
    wire::ForwardRequestParts p;
    p.layer = 1;
    p.sequences.push_back({"tenant7/chat-3", 40, 2});
    return wire::EncodeForwardRequest(p);
  }
  RawCallOptions Options(const std::string& route = "tenant7") {
    return RawCallOptionsFor(options_, route);
  }

  FakeService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  GdnClientOptions options_;
  std::unique_ptr<GdnClient> client_;
};

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
