// A fake gdn.v1 service for the client's raw-path tests (raw_forward_test,
// raw_forward_stream_test): Forward and each ForwardStream message answered
// by a settable Behaviour; the route header of each call (a stream: once)
// recorded. FakeForwardServiceTest serves it on loopback.
#ifndef GDN_TESTS_CLIENT_FAKE_FORWARD_SERVICE_H_
#define GDN_TESTS_CLIENT_FAKE_FORWARD_SERVICE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/gdn_client.h"
#include "client/raw_forward.h"
#include "client/routing_key.h"
#include "gdn/v1/gdn.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/forward_wire.h"

namespace gdn::client {

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
  int unavailable_first = 0;  // tries (Forward calls, streams) answered UNAVAILABLE first
  int sleep_ms = 0;
  // ForwardStream only, by the request's first session: fail_session's
  // requests are answered with error_code NOT_FOUND; park_session's are
  // never answered: the stream waits until the client cancels it (a piece
  // the server parks behind one that never comes).
  std::string fail_session;
  std::string park_session;
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
  // The peer (client address and port: one per connection) of each stream.
  std::vector<std::string> stream_peers() {
    absl::MutexLock lock(&mu_);
    return stream_peers_;
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
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ForwardResponse, v1::ForwardRequest>* stream) override {
    {
      absl::MutexLock lock(&mu_);
      auto it = context->client_metadata().find(kRouteHeader);
      routes_.push_back(it == context->client_metadata().end()
                            ? ""
                            : std::string(it->second.data(), it->second.size()));
      stream_peers_.push_back(context->peer());
      if (behaviour_.unavailable_first > 0) {  // a draining server ends the stream
        --behaviour_.unavailable_first;
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "draining");
      }
    }
    v1::ForwardRequest request;
    while (stream->Read(&request)) {
      Behaviour b;
      {
        absl::MutexLock lock(&mu_);
        b = behaviour_;
      }
      // A failed RPC status ends the stream with it (a server that fails).
      if (b.status != grpc::StatusCode::OK) return grpc::Status(b.status, b.message);
      const std::string& session =
          request.sequences().empty() ? std::string() : request.sequences(0).session_id();
      if (!b.park_session.empty() && session == b.park_session) {
        while (!context->IsCancelled()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while parked");
      }
      if (!b.fail_session.empty() && session == b.fail_session) {
        b.error_code = static_cast<int32_t>(absl::StatusCode::kNotFound);
        b.message = "session '" + session + "' not found";
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
  std::vector<std::string> stream_peers_ ABSL_GUARDED_BY(mu_);
};

// The fake on a loopback port, a GdnClient on it (no retries unless a test
// asks) and one request, typed and as bytes.
class FakeForwardServiceTest : public ::testing::Test {
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
  static grpc::ByteBuffer RequestBytes(uint64_t request_id = 0,
                                       const std::string& session = "tenant7/chat-3") {
    wire::ForwardRequestParts p;
    p.layer = 1;
    p.sequences.push_back({session, 40, 2});
    p.request_id = request_id;
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

}  // namespace gdn::client

#endif  // GDN_TESTS_CLIENT_FAKE_FORWARD_SERVICE_H_
