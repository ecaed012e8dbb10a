// The whole server in one object: backend, engine (with the state cache),
// gRPC service (+ health and reflection) and the Prometheus exposer.
// main.cc and the in-process tests start it the same way.
//
// Threading: Start, Shutdown and the accessors are for the owning thread.
#ifndef GDN_SERVER_GDN_SERVER_H_
#define GDN_SERVER_GDN_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/engine.h"
#include "server/gdn_service.h"
#include "server/metrics.h"
#include "server/server_config.h"
#include "server/service_context.h"

namespace prometheus {
class Exposer;
}

namespace gdn {

// The version in gdn_build_info and GetServerInfo.
const char* GdnVersion();

// "HOST:PORT" -> host and port ("[::1]:50051" keeps its brackets).
bool SplitHostPort(const std::string& address, std::string* host, int* port);

class GdnServer {
 public:
  static absl::StatusOr<std::unique_ptr<GdnServer>> Start(
      const ServerConfig& config);
  ~GdnServer();  // Shutdown()

  GdnServer(const GdnServer&) = delete;
  GdnServer& operator=(const GdnServer&) = delete;

  // With the ports actually bound (a port 0 in the config is resolved).
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  const EngineInfo& engine_info() const { return engine_->info(); }

  // Drain: health NOT_SERVING, stop accepting calls, let in-flight calls
  // finish (cancelling what remains after config.drain_timeout), stop the
  // engine and the exposer. Idempotent.
  void Shutdown();

 private:
  GdnServer() = default;

  ServerConfig config_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<Engine> engine_;
  ServiceContext context_;
  std::unique_ptr<GdnServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string grpc_address_;
  std::string metrics_address_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace gdn

#endif  // GDN_SERVER_GDN_SERVER_H_
