#include "tests/server/server_harness.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <future>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "kernels/testing/error_stats.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "proto/tensor_codec.h"
#include "tests/server/ops/http_get.h"

namespace gdn::testing {

ServerConfig SmallServerConfig() {
  ServerConfig c;
  c.listen = "127.0.0.1:0";
  c.metrics_listen = "127.0.0.1:0";
  c.backend.kind = BackendKind::kCpu;
  c.backend.cpu_threads = 2;
  c.num_layers = 2;
  c.options.shape.num_qk_heads = 2;
  c.options.shape.num_v_heads = 4;
  c.options.shape.head_dim_k = 64;
  c.options.shape.head_dim_v = 64;
  c.options.input_dtype = DType::kF32;
  c.device_state_budget_bytes = 16 << 20;
  c.host_state_budget_bytes = 16 << 20;
  c.max_batch_tokens = 64;
  c.max_message_bytes = 1 << 20;
  c.drain_timeout = absl::Seconds(5);
  return c;
}

ServerHarness::ServerHarness(const ServerConfig& config) : config_(config) {
  absl::StatusOr<std::unique_ptr<GdnServer>> server = GdnServer::Start(config);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return;
  server_ = std::move(*server);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  channel_ = grpc::CreateCustomChannel(server_->grpc_address(),
                                       grpc::InsecureChannelCredentials(), args);
  stub_ = gdn::v1::GdnService::NewStub(channel_);
}

ServerHarness::~ServerHarness() {
  stub_.reset();
  channel_.reset();
  if (server_ != nullptr) server_->Shutdown();
}

grpc::Status ServerHarness::Forward(const gdn::v1::ForwardRequest& request,
                                    gdn::v1::ForwardResponse* response,
                                    absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return stub_->Forward(&context, request, response);
}

std::string ServerHarness::CreateSession(const std::string& id) {
  grpc::ClientContext context;
  gdn::v1::CreateSessionRequest request;
  request.set_session_id(id);
  gdn::v1::CreateSessionResponse response;
  const grpc::Status status = stub_->CreateSession(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.session_id();
}

gdn::v1::DescribeSessionResponse ServerHarness::Describe(const std::string& id) {
  grpc::ClientContext context;
  gdn::v1::DescribeSessionRequest request;
  request.set_session_id(id);
  gdn::v1::DescribeSessionResponse response;
  const grpc::Status status =
      stub_->DescribeSession(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

std::vector<double> OracleModel::Apply(int layer,
                                       const std::vector<std::string>& sessions,
                                       oracle::Inputs inputs) {
  inputs.initial_states.assign(sessions.size(), {});
  for (size_t i = 0; i < sessions.size(); ++i) {
    auto it = states_.find({sessions[i], layer});
    if (it != states_.end()) inputs.initial_states[i] = it->second;
  }
  oracle::Outputs out = oracle::Run(options_, inputs);
  for (size_t i = 0; i < sessions.size(); ++i) {
    std::vector<float> state = ToFloat(out.final_states[i]);
    RoundThroughState(options_.state_dtype, &state);
    states_[{sessions[i], layer}] = std::move(state);
  }
  return out.o;
}

void OracleModel::Fork(const std::string& parent, const std::string& child) {
  std::vector<std::pair<std::pair<std::string, int>, std::vector<float>>> add;
  for (const auto& [key, state] : states_) {
    if (key.first == parent) add.push_back({{child, key.second}, state});
  }
  for (auto& [key, state] : add) states_[key] = std::move(state);
}

double MaxRelError(const gdn::v1::Tensor& o, const std::vector<double>& ref) {
  const std::vector<float> got = wire::ToFloats(o);
  EXPECT_EQ(got.size(), ref.size());
  if (got.size() != ref.size()) return 1e9;
  const ErrorStats stats = Compare(got.data(), ref.data(), got.size());
  EXPECT_EQ(stats.nonfinite, 0);
  return stats.max_abs_rel;
}

std::string ScrapeMetrics(int port) {
  return HttpRequest(port, "GET", "/metrics").body;  // "" when unreachable
}

double MetricValue(const std::string& body, const std::string& name,
                   const std::vector<std::string>& labels) {
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    if (!absl::StartsWith(line, name)) continue;
    const absl::string_view rest = line.substr(name.size());
    if (!rest.empty() && rest[0] != '{' && rest[0] != ' ') continue;
    bool all = true;
    for (const std::string& label : labels) {
      all = all && absl::StrContains(rest, label);
    }
    if (!all) continue;
    const size_t space = line.rfind(' ');
    double value;
    if (absl::SimpleAtod(line.substr(space + 1), &value)) return value;
  }
  return -1;
}

namespace {

// Blocking generic unary call with raw protobuf bytes.
grpc::Status RawUnary(grpc::Channel& channel, const std::string& method,
                      const std::string& request, std::string* response) {
  grpc::GenericStub stub(std::shared_ptr<grpc::Channel>(&channel, [](auto*) {}));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request_buffer,
                 &response_buffer,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status status = done.get_future().get();
  std::vector<grpc::Slice> slices;
  if (status.ok() && response_buffer.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      response->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return status;
}

std::string LengthDelimited(int field, const std::string& value) {
  std::string out;
  out.push_back(static_cast<char>((field << 3) | 2));
  out.push_back(static_cast<char>(value.size()));  // < 128 here
  out += value;
  return out;
}

}  // namespace

int HealthCheck(grpc::Channel& channel, const std::string& service) {
  // HealthCheckRequest { string service = 1; }
  std::string response;
  const grpc::Status status =
      RawUnary(channel, "/grpc.health.v1.Health/Check",
               service.empty() ? "" : LengthDelimited(1, service), &response);
  if (!status.ok()) return -1;
  // HealthCheckResponse { ServingStatus status = 1; } (varint)
  if (response.size() == 2 && response[0] == 0x08) return response[1];
  return response.empty() ? 0 : -2;
}

std::string ReflectionListServices(grpc::Channel& channel) {
  grpc::GenericStub stub(std::shared_ptr<grpc::Channel>(&channel, [](auto*) {}));
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      &cq);
  // ServerReflectionRequest { string list_services = 7; }
  grpc::Slice slice(LengthDelimited(7, "*"));
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  void* tag;
  bool ok;
  auto step = [&](intptr_t want) {
    return cq.Next(&tag, &ok) && reinterpret_cast<intptr_t>(tag) == want && ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  if (!step(1)) return "";
  call->Write(request, reinterpret_cast<void*>(2));
  if (!step(2)) return "";
  call->WritesDone(reinterpret_cast<void*>(3));
  if (!step(3)) return "";
  call->Read(&response, reinterpret_cast<void*>(4));
  if (!step(4)) return "";
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  std::vector<grpc::Slice> slices;
  std::string out;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      out.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return out;
}

}  // namespace gdn::testing
