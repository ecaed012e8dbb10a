// GdnClient behind a proxy, against an in-process fake gdn.v1 service that
// records the `x-gdn-route` header of every call and can answer UNAVAILABLE
// ("draining") a number of times: the header carries the routing key of the
// call's sessions, mixed keys are refused before anything is sent, and
// UNAVAILABLE is retried (and only it).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/gdn_client.h"
#include "client/routing_key.h"
#include "client/session.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace gdn::client {
namespace {

class FakeService final : public v1::GdnService::Service {
 public:
  // Routes seen, one per call, "" when the call had no header.
  std::vector<std::string> routes() {
    absl::MutexLock lock(&mu_);
    return routes_;
  }
  void FailNext(int n, grpc::StatusCode code = grpc::StatusCode::UNAVAILABLE) {
    absl::MutexLock lock(&mu_);
    fail_left_ = n;
    fail_code_ = code;
  }

  grpc::Status GetServerInfo(grpc::ServerContext*, const v1::ServerInfoRequest*,
                             v1::ServerInfoResponse* response) override {
    v1::LayerConfig* c = response->mutable_config();
    c->set_num_layers(2);
    c->set_num_qk_heads(1);
    c->set_num_v_heads(1);
    c->set_head_dim_k(2);
    c->set_head_dim_v(2);
    c->set_activation_dtype(v1::DTYPE_FP32);
    c->set_gating_mode("direct");
    return grpc::Status::OK;
  }
  grpc::Status CreateSession(grpc::ServerContext* context, const v1::CreateSessionRequest* request,
                             v1::CreateSessionResponse* response) override {
    if (grpc::Status s = Record(context); !s.ok()) return s;
    response->set_session_id(request->session_id());
    return grpc::Status::OK;
  }
  grpc::Status ForkSession(grpc::ServerContext* context, const v1::ForkSessionRequest* request,
                           v1::ForkSessionResponse* response) override {
    if (grpc::Status s = Record(context); !s.ok()) return s;
    response->set_session_id(request->child_id());
    return grpc::Status::OK;
  }
  grpc::Status CloseSession(grpc::ServerContext* context, const v1::CloseSessionRequest*,
                            v1::CloseSessionResponse*) override {
    return Record(context);
  }
  grpc::Status Forward(grpc::ServerContext* context, const v1::ForwardRequest* request,
                       v1::ForwardResponse* response) override {
    if (grpc::Status s = Record(context); !s.ok()) return s;
    *response->mutable_o() = request->v();
    for (const v1::SequenceSpec& spec : request->sequences()) {
      response->add_positions(spec.position() + spec.num_tokens());
    }
    return grpc::Status::OK;
  }
  grpc::Status ForwardStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ForwardResponse, v1::ForwardRequest>* stream) override {
    if (grpc::Status s = Record(context); !s.ok()) return s;
    v1::ForwardRequest request;
    while (stream->Read(&request)) {
      v1::ForwardResponse response;
      response.set_request_id(request.request_id());
      stream->Write(response);
    }
    return grpc::Status::OK;
  }

 private:
  grpc::Status Record(grpc::ServerContext* context) {
    const auto& md = context->client_metadata();
    auto it = md.find(kRouteHeader);
    absl::MutexLock lock(&mu_);
    routes_.push_back(it == md.end() ? "" : std::string(it->second.data(), it->second.size()));
    if (fail_left_ > 0) {
      --fail_left_;
      return grpc::Status(fail_code_, "draining");
    }
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  std::vector<std::string> routes_ ABSL_GUARDED_BY(mu_);
  int fail_left_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::StatusCode fail_code_ ABSL_GUARDED_BY(mu_) = grpc::StatusCode::UNAVAILABLE;
};

class GdnClientRoutingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    GdnClientOptions options;
    options.deadline = absl::Seconds(10);
    options.session_affinity = true;
    options.retry.initial_backoff = absl::Milliseconds(1);
    options.retry.max_backoff = absl::Milliseconds(5);
    options.on_retry = [this](absl::string_view method, const absl::Status&, int) {
      absl::MutexLock lock(&retries_mu_);
      ++retries_[std::string(method)];
    };
    client_ = std::make_unique<GdnClient>("127.0.0.1:" + std::to_string(port), options);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  static v1::ForwardRequest Request(const std::vector<std::string>& ids) {
    v1::ForwardRequest request;
    for (const std::string& id : ids) {
      v1::SequenceSpec* spec = request.add_sequences();
      spec->set_session_id(id);
      spec->set_num_tokens(1);
    }
    return request;
  }
  int Retries(const std::string& method) {
    absl::MutexLock lock(&retries_mu_);
    return retries_[method];
  }

  FakeService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GdnClient> client_;
  absl::Mutex retries_mu_;
  std::map<std::string, int> retries_ ABSL_GUARDED_BY(retries_mu_);
};

TEST_F(GdnClientRoutingTest, EverySessionCallCarriesItsRoutingKey) {
  ASSERT_TRUE(client_->CreateSession("tenant7/chat-3").ok());
  ASSERT_TRUE(client_->Forward(Request({"tenant7/chat-3", "tenant7"})).ok());
  ASSERT_TRUE(client_->ForkSession("tenant7/chat-3", "tenant7/chat-4").ok());
  ASSERT_TRUE(client_->CloseSession("plain-id").ok());
  EXPECT_EQ(service_.routes(),
            (std::vector<std::string>{"tenant7", "tenant7", "tenant7", "plain-id"}));
}

TEST_F(GdnClientRoutingTest, SessionPicksRoutableIds) {
  absl::StatusOr<Session> s = Session::Create(client_.get());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(RoutingKey(s->id()), s->id());
  absl::StatusOr<Session> child = s->Fork();
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(RoutingKey(child->id()), s->id());
  EXPECT_EQ(service_.routes(), (std::vector<std::string>{s->id(), s->id()}));
}

TEST_F(GdnClientRoutingTest, MixedKeysAreRefusedBeforeSending) {
  absl::StatusOr<v1::ForwardResponse> r = client_->Forward(Request({"a/1", "b/2"}));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("a/1, b/2"), std::string::npos) << r.status();
  EXPECT_EQ(client_->ForkSession("a/1", "b/1").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::unique_ptr<ForwardStream> stream = client_->OpenForwardStream("a");
  EXPECT_EQ(stream->Send(Request({"b/1"})).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(stream->Send(Request({"a/1"})).ok());
  ASSERT_TRUE(stream->Receive().ok());
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(service_.routes(), (std::vector<std::string>{"a"}));  // the stream only
}

TEST_F(GdnClientRoutingTest, WithoutAffinityNothingIsRefused) {
  GdnClientOptions options = client_->options();
  options.session_affinity = false;
  GdnClient direct(server_->InProcessChannel({}), options);
  ASSERT_TRUE(direct.Forward(Request({"a/1", "b/2"})).ok());
  ASSERT_TRUE(direct.ForkSession("a/1", "b/1").ok());
  EXPECT_EQ(service_.routes(), (std::vector<std::string>{"a", "a"}));
}

TEST_F(GdnClientRoutingTest, UnavailableIsRetriedAndCounted) {
  service_.FailNext(2);
  ASSERT_TRUE(client_->Forward(Request({"k/1"})).ok());
  EXPECT_EQ(Retries("Forward"), 2);
  EXPECT_EQ(service_.routes().size(), 3u);
  service_.FailNext(1);
  ASSERT_TRUE(client_->CreateSession("k/2").ok());
  EXPECT_EQ(Retries("CreateSession"), 1);
}

TEST_F(GdnClientRoutingTest, OtherCodesAreNotRetried) {
  service_.FailNext(1, grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(client_->Forward(Request({"k/1"})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(service_.routes().size(), 1u);
  EXPECT_EQ(Retries("Forward"), 0);
}

TEST_F(GdnClientRoutingTest, RetriesAreBounded) {
  service_.FailNext(1000);
  EXPECT_EQ(client_->CloseSession("k/1").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(static_cast<int>(service_.routes().size()), client_->options().retry.max_attempts);
}

}  // namespace
}  // namespace gdn::client
