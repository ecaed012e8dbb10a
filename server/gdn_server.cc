#include "server/gdn_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <future>
#include <iostream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "proto/grpc_transport.h"
#include "server/auth/listen_policy.h"
#include "server/auth/tls_credentials.h"
#include "server/drain_listener.h"
#include "server/ops/status_page.h"
#include "server/sessions/session_transfer.h"

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
  const bool unix_socket = wire::IsUnixAddress(config.listen);
  if (unix_socket ? wire::UnixSocketPath(config.listen).empty()
                  : !SplitHostPort(config.listen, &grpc_host, &requested_grpc_port)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "listen: expected HOST:PORT or unix:/path, got '", config.listen, "'"));
  }
  if (!SplitHostPort(config.metrics_listen, &metrics_host,
                     &requested_metrics_port)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics_listen: expected HOST:PORT, got '", config.metrics_listen,
        "'"));
  }

  if (absl::Status s = CheckListenPolicy(config.listen, !config.tokens_file.empty(),
                                         config.allow_insecure_remote);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      GrpcServerCredentials(config.grpc_tls);
  if (!credentials.ok()) return credentials.status();

  std::unique_ptr<GdnServer> server(new GdnServer());
  server->config_ = config;
  if (!config.tokens_file.empty()) {
    absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::Create(
        config.tokens_file, {config.tenant_max_sessions, config.tenant_max_state_pages});
    if (!auth.ok()) return auth.status();
    server->authenticator_ = std::move(*auth);
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      CreateBackend(config.backend);
  if (!backend.ok()) return backend.status();
  const std::string backend_name((*backend)->name());
  Backend* backend_ptr = backend->get();  // owned by the engine from here
  server->metrics_ = std::make_unique<ServerMetrics>(GdnVersion(), backend_name);
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(config, std::move(*backend), server->metrics_.get());
  if (!engine.ok()) return engine.status();
  server->engine_ = std::move(*engine);
  server->metrics_->SetStateFormat(
      StateDTypeName(config.options.state_dtype),
      IsQuantizedState(config.options.state_dtype)
          ? StateRoundingName(config.options.state_rounding)
          : "-",
      static_cast<int64_t>(server->engine_->info().layout.page_bytes));
  server->regions_ = std::make_unique<RegionRegistry>(backend_ptr);
  server->context_.regions = server->regions_.get();
  server->context_.region_access = {server->regions_.get(), backend_ptr, ""};
  ChannelServer::Options channel_options;
  channel_options.spin = config.channel_spin;
  server->channels_ = std::make_unique<ChannelRegistry>(config.max_channels, channel_options);
  server->context_.channels = server->channels_.get();

  server->context_.engine = server->engine_.get();
  server->context_.metrics = server->metrics_.get();
  server->context_.config = config;
  server->context_.layer_config =
      MakeLayerConfig(config.num_layers, config.options);
  server->context_.version = GdnVersion();
  if (server->authenticator_ != nullptr) {
    server->tenant_metrics_ = std::make_unique<TenantMetrics>(*server->metrics_->registry());
    server->context_.authenticator = server->authenticator_.get();
    server->context_.tenant_metrics = server->tenant_metrics_.get();
    server->tenant_gauges_ = std::make_unique<TenantGaugeRefresher>(
        server->engine_.get(), server->tenant_metrics_.get(), kTenantGaugePeriod);
  }
  if (!config.snapshot_dir.empty()) {
    absl::StatusOr<std::unique_ptr<SessionSnapshotDir>> snapshots =
        SessionSnapshotDir::Open(config.snapshot_dir,
                                 server->context_.layer_config,
                                 server->engine_->info().layout.page_bytes,
                                 server->metrics_.get());
    if (!snapshots.ok()) return snapshots.status();
    server->snapshot_dir_ = std::move(*snapshots);
    server->drain_gate_ = std::make_unique<DrainGate>();
    server->context_.snapshot_dir = server->snapshot_dir_.get();
    server->context_.drain_gate = server->drain_gate_.get();
    SessionSnapshotDir* dir = server->snapshot_dir_.get();
    server->engine_->SetSessionRestorer(
        [dir](StateCache& cache, const std::string& id) {
          return dir->RestoreIfAbsent(cache, id);
        });
    std::cerr << "gdn-server: snapshot_dir " << dir->dir() << ": "
              << dir->CountSnapshots()
              << " session snapshot(s) waiting to be restored on first use"
              << std::endl;
  }
  server->service_ = std::make_unique<GdnServiceImpl>(&server->context_);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  // The drain listener hands gRPC plaintext connections only
  // (grpc::AddInsecureChannelFromFd); with TLS gRPC listens itself, and a
  // drain then relies on gRPC's own shutdown (drain_listener.h says what
  // that costs behind a keep-alive proxy).
  if (!config.snapshot_dir.empty() && !unix_socket && !config.grpc_tls.enabled()) {
    absl::StatusOr<std::unique_ptr<DrainListener>> listener =
        DrainListener::Bind(grpc_host, requested_grpc_port);
    if (!listener.ok()) return listener.status();
    server->drain_listener_ = std::move(*listener);
    bound_port = server->drain_listener_->port();
  } else {
    builder.AddListeningPort(config.listen, *credentials, &bound_port);
  }
  wire::TransportOptions transport;
  transport.max_message_bytes = config.max_message_bytes;
  transport.stream_window_bytes = config.grpc_window_bytes;
  transport.max_frame_bytes = config.grpc_max_frame_bytes;
  wire::ApplyServerTransport(transport, &builder);
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || (!unix_socket && bound_port == 0)) {
    return absl::UnavailableError(
        absl::StrCat("could not listen on ", config.listen));
  }
  if (server->drain_listener_ != nullptr) {
    server->drain_listener_->Start(server->server_.get());
  }
  server->grpc_port_ = unix_socket ? 0 : bound_port;
  server->grpc_address_ =
      unix_socket ? config.listen : absl::StrCat(grpc_host, ":", bound_port);
  if (auto* health = server->server_->GetHealthCheckService()) {
    health->SetServingStatus(true);
    // Probes may name the service (Kubernetes grpc probes, grpc-health-probe).
    health->SetServingStatus(gdn::v1::GdnService::service_full_name(), true);
  }

  absl::StatusOr<std::unique_ptr<HttpEndpoint>> metrics_endpoint =
      HttpEndpoint::Start(config.metrics_listen,
                          MetricsPortRoutes(server->metrics_->registry()));
  if (!metrics_endpoint.ok()) {
    return absl::Status(metrics_endpoint.status().code(),
                        absl::StrCat("metrics: ",
                                     metrics_endpoint.status().message()));
  }
  server->metrics_endpoint_ = std::move(*metrics_endpoint);
  server->metrics_port_ = server->metrics_endpoint_->port();
  server->metrics_address_ =
      absl::StrCat(metrics_host, ":", server->metrics_port_);
  return server;
}

GdnServer::~GdnServer() { Shutdown(); }

void GdnServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ != nullptr) {
    // Closed before health turns: whoever sees NOT_SERVING is refused too.
    if (drain_gate_ != nullptr) drain_gate_->BeginDrain();
    if (auto* health = server_->GetHealthCheckService()) {
      health->SetServingStatus(false);
      health->SetServingStatus(gdn::v1::GdnService::service_full_name(), false);
    }
    // The listener stays up (answering UNAVAILABLE) until the files exist.
    if (snapshot_dir_ != nullptr && engine_ != nullptr) DrainToSnapshotDir();
    if (drain_listener_ != nullptr) {
      // New connections are refused from here, the open ones end
      // (DrainListener); the calls their peers sent before they saw the end
      // still reach a handler ("draining") before gRPC shuts down.
      drain_listener_->Close();
      const int ended = drain_listener_->EndConnections();
      absl::SleepFor(kConnectionEndMargin);
      std::cerr << "gdn-server: drain: listener closed, " << ended
                << " connection(s) ended" << std::endl;
    }
    // Stops accepting, waits for in-flight calls (the engine keeps running
    // them), cancels what is left at the deadline.
    server_->Shutdown(absl::ToChronoTime(absl::Now() + config_.drain_timeout));
  }
  if (tenant_gauges_ != nullptr) tenant_gauges_->Stop();  // before the engine
  // Channels stop taking requests (answering those posted UNAVAILABLE);
  // calls they handed on complete in the engine.
  if (channels_ != nullptr) channels_->StopAll();
  if (engine_ != nullptr) engine_->Stop();
  if (metrics_endpoint_ != nullptr) metrics_endpoint_->Stop();
  if (server_ != nullptr) server_->Wait();
}

absl::Status GdnServer::ReloadTokens() {
  if (authenticator_ == nullptr) {
    return absl::FailedPreconditionError("no --tokens_file to reload");
  }
  absl::Status s = authenticator_->Reload();
  if (tenant_metrics_ != nullptr) tenant_metrics_->CountReload(s.ok());
  return s;
}

void GdnServer::DrainToSnapshotDir() {
  const absl::Time start = absl::Now();
  if (!drain_gate_->WaitIdle(start + config_.drain_timeout)) {
    std::cerr << "gdn-server: drain: " << drain_gate_->in_flight()
              << " call(s) unfinished after drain_timeout "
              << absl::FormatDuration(config_.drain_timeout)
              << "; failing those not started" << std::endl;
    engine_->FailPendingCalls(absl::UnavailableError(
        "draining: the call had not started when drain_timeout passed and "
        "was not applied; retry on another server"));
    // Started calls always complete; this bound is only a safety net.
    if (!drain_gate_->WaitIdle(absl::Now() + config_.drain_timeout)) {
      std::cerr << "gdn-server: drain: " << drain_gate_->in_flight()
                << " call(s) still unfinished; writing the sessions anyway"
                << std::endl;
    }
  }
  std::promise<SnapshotDrainReport> written;
  std::future<SnapshotDrainReport> report = written.get_future();
  SessionSnapshotDir* dir = snapshot_dir_.get();
  engine_->RunSessionCommand("", [dir, &written](StateCache& cache) {
    written.set_value(dir->WriteAll(cache));
  });
  drain_report_ = report.get();
  for (const std::string& error : drain_report_.errors) {
    std::cerr << "gdn-server: drain: NOT written: " << error << std::endl;
  }
  std::cerr << "gdn-server: drain: wrote " << drain_report_.written
            << " session(s), " << drain_report_.bytes << " bytes, to "
            << dir->dir() << " in "
            << absl::FormatDuration(absl::Now() - start) << "; "
            << drain_report_.failed << " failed" << std::endl;
}

}  // namespace gdn
