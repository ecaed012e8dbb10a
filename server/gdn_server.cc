#include "server/gdn_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"
#include "server/session_transfer.h"

#ifndef GDN_VERSION
#define GDN_VERSION "0.0.0"
#endif

namespace gdn {

const char* GdnVersion() { return GDN_VERSION; }

bool SplitHostPort(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  if (!absl::SimpleAtoi(address.substr(colon + 1), port) || *port < 0 ||
      *port > 65535) {
    return false;
  }
  *host = address.substr(0, colon);
  return true;
}

absl::StatusOr<std::unique_ptr<GdnServer>> GdnServer::Start(
    const ServerConfig& config) {
  if (absl::Status s = ValidateServerConfig(config); !s.ok()) return s;
  std::string grpc_host, metrics_host;
  int requested_grpc_port = 0, requested_metrics_port = 0;
  if (!SplitHostPort(config.listen, &grpc_host, &requested_grpc_port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen: expected HOST:PORT, got '", config.listen, "'"));
  }
  if (!SplitHostPort(config.metrics_listen, &metrics_host,
                     &requested_metrics_port)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics_listen: expected HOST:PORT, got '", config.metrics_listen,
        "'"));
  }

  std::unique_ptr<GdnServer> server(new GdnServer());
  server->config_ = config;
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      CreateBackend(config.backend);
  if (!backend.ok()) return backend.status();
  const std::string backend_name((*backend)->name());
  server->metrics_ = std::make_unique<ServerMetrics>(GdnVersion(), backend_name);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(config, std::move(*backend), server->metrics_.get());
  if (!engine.ok()) return engine.status();
  server->engine_ = std::move(*engine);

  server->context_.engine = server->engine_.get();
  server->context_.metrics = server->metrics_.get();
  server->context_.config = config;
  server->context_.layer_config =
      MakeLayerConfig(config.num_layers, config.options);
  server->context_.version = GdnVersion();
  server->service_ = std::make_unique<GdnServiceImpl>(&server->context_);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(config.listen, grpc::InsecureServerCredentials(),
                           &bound_port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || bound_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("could not listen on ", config.listen));
  }
  server->grpc_port_ = bound_port;
  server->grpc_address_ = absl::StrCat(grpc_host, ":", bound_port);
  if (auto* health = server->server_->GetHealthCheckService()) {
    health->SetServingStatus(true);
    // Probes may name the service (Kubernetes grpc probes, grpc-health-probe).
    health->SetServingStatus(gdn::v1::GdnService::service_full_name(), true);
  }

  // prometheus-cpp reports a bind failure by throwing; this is the boundary
  // where that becomes a status.
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(
        config.metrics_listen, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "could not listen for metrics on ", config.metrics_listen, ": ",
        e.what()));
  }
  server->exposer_->RegisterCollectable(server->metrics_->registry());
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  server->metrics_port_ = ports.empty() ? requested_metrics_port : ports[0];
  server->metrics_address_ =
      absl::StrCat(metrics_host, ":", server->metrics_port_);
  return server;
}

GdnServer::~GdnServer() { Shutdown(); }

void GdnServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ != nullptr) {
    if (auto* health = server_->GetHealthCheckService()) {
      health->SetServingStatus(false);
      health->SetServingStatus(gdn::v1::GdnService::service_full_name(), false);
    }
    // Stops accepting, waits for in-flight calls (the engine keeps running
    // them), cancels what is left at the deadline.
    server_->Shutdown(absl::ToChronoTime(absl::Now() + config_.drain_timeout));
  }
  if (engine_ != nullptr) engine_->Stop();
  exposer_.reset();  // civetweb takes up to ~2 s to stop its listener
  if (server_ != nullptr) server_->Wait();
}

}  // namespace gdn
