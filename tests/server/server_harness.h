// Test-only helpers for the in-process service tests: a GdnServer on free
// ports with the cpu backend and small shapes, a stub, a float64 oracle model
// of every (session, layer) state, raw-socket metric scraping and
// hand-encoded health / reflection calls (their generated stubs are not
// installed).
#ifndef GDN_TESTS_SERVER_SERVER_HARNESS_H_
#define GDN_TESTS_SERVER_SERVER_HARNESS_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gdn/v1/gdn.grpc.pb.h"
#include "kernels/oracle/gdn_oracle.h"
#include "server/gdn_server.h"
#include "server/ops/server_config.h"

namespace gdn::testing {

// layers=2, Hqk=2, Hv=4, K=V=64, fp32 activations, cpu backend with 2
// threads, 16 MiB per tier, max_batch_tokens 64 (so prefills get chunked).
ServerConfig SmallServerConfig();

class ServerHarness {
 public:
  explicit ServerHarness(const ServerConfig& config);
  ~ServerHarness();

  GdnServer& server() { return *server_; }
  gdn::v1::GdnService::Stub& stub() { return *stub_; }
  std::shared_ptr<grpc::Channel> channel() { return channel_; }
  const ServerConfig& config() const { return config_; }

  grpc::Status Forward(const gdn::v1::ForwardRequest& request,
                       gdn::v1::ForwardResponse* response,
                       absl::Duration timeout = absl::Seconds(60));
  std::string CreateSession(const std::string& id);  // fails the test on error
  gdn::v1::DescribeSessionResponse Describe(const std::string& id);

 private:
  ServerConfig config_;
  std::unique_ptr<GdnServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<gdn::v1::GdnService::Stub> stub_;
};

// Every (session, layer) state as the float64 oracle computes it.
class OracleModel {
 public:
  explicit OracleModel(const GdnOptions& options) : options_(options) {}
  // Runs `inputs` (sequence i on sessions[i]) from the tracked states,
  // stores the final states, returns o [T, Hv, V].
  std::vector<double> Apply(int layer, const std::vector<std::string>& sessions,
                            oracle::Inputs inputs);
  void Fork(const std::string& parent, const std::string& child);

 private:
  GdnOptions options_;
  std::map<std::pair<std::string, int>, std::vector<float>> states_;
};

// max|got - ref| / max|ref| of a response's o against the oracle.
double MaxRelError(const gdn::v1::Tensor& o, const std::vector<double>& ref);

// GET /metrics over a raw socket; the body.
std::string ScrapeMetrics(int port);
// The value of the first sample of `name` whose labels include every
// `labels` pair ("key=\"value\""); -1 when there is none.
double MetricValue(const std::string& body, const std::string& name,
                   const std::vector<std::string>& labels);

// grpc.health.v1.Health/Check for `service`: the ServingStatus number
// (1 = SERVING), or -1 on an RPC error.
int HealthCheck(grpc::Channel& channel, const std::string& service);
// grpc.reflection.v1alpha.ServerReflection list_services: the raw response
// bytes (they contain the service names), or "" on error.
std::string ReflectionListServices(grpc::Channel& channel);

}  // namespace gdn::testing

#endif  // GDN_TESTS_SERVER_SERVER_HARNESS_H_
