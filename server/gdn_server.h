// The whole server in one object: backend, engine (with the state cache),
// gRPC service (+ health and reflection) and the metrics port (/metrics and
// the status page, server/ops/status_page.h).
// main.cc and the in-process tests start it the same way.
//
// Threading: Start, Shutdown and the accessors are for the owning thread.
#ifndef GDN_SERVER_GDN_SERVER_H_
#define GDN_SERVER_GDN_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/auth/authenticator.h"
#include "server/auth/tenant_gauge_refresher.h"
#include "server/auth/tenant_metrics.h"
#include "server/sessions/drain_gate.h"
#include "server/engine/engine.h"
#include "server/regions/region_registry.h"
#include "server/rpc/gdn_service.h"
#include "server/ops/http_endpoint.h"
#include "server/ops/metrics.h"
#include "server/ops/server_config.h"
#include "server/rpc/service_context.h"
#include "server/sessions/session_snapshot_dir.h"

namespace gdn {

// The version in gdn_build_info and GetServerInfo.
const char* GdnVersion();

// gdn-server's exit status when a drain could not hand every session over
// to --snapshot_dir (0: drained cleanly, 1: could not start, 2: bad flags).
// Non-zero so that a supervisor or an operator's script sees the loss that
// the log line alone would hide.
inline constexpr int kExitSessionsLost = 3;

// How often the per-tenant gauges (gdn_tenant_sessions, ...) are refreshed.
inline constexpr absl::Duration kTenantGaugePeriod = absl::Seconds(2);

// "HOST:PORT" -> host and port ("[::1]:50051" keeps its brackets).
bool SplitHostPort(const std::string& address, std::string* host, int* port);

// The gRPC port of a server with --snapshot_dir over TCP (drain_listener.h).
class DrainListener;

class GdnServer {
 public:
  static absl::StatusOr<std::unique_ptr<GdnServer>> Start(
      const ServerConfig& config);
  ~GdnServer();  // Shutdown()

  GdnServer(const GdnServer&) = delete;
  GdnServer& operator=(const GdnServer&) = delete;

  // With the ports actually bound (a port 0 in the config is resolved); a
  // Unix socket's address is the config's, its port 0.
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  const EngineInfo& engine_info() const { return engine_->info(); }

  // Drain: health NOT_SERVING, stop accepting calls, let in-flight calls
  // finish (cancelling what remains after config.drain_timeout), stop the
  // engine and the metrics port. Idempotent.
  //
  // With config.snapshot_dir the drain hands every session over first, in
  // this order: (1) new calls that name or create a session are answered
  // UNAVAILABLE "draining" (not applied) and health turns NOT_SERVING;
  // (2) calls already taken finish (those not started after drain_timeout
  // fail UNAVAILABLE, unapplied); (3) every session is written to
  // snapshot_dir (session_snapshot_dir.h) and closed; (4) only then does the
  // listener stop, so a proxy fails over (connection refused) only once the
  // files are there; (5) the open connections end too (DrainListener in
  // gdn_server.cc), and gRPC shuts down with no call in flight that it
  // would cancel (CANCELLED, which clients do not retry).
  void Shutdown();

  // What step (3) of the last drain wrote (zeros without snapshot_dir).
  const SnapshotDrainReport& drain_report() const { return drain_report_; }
  // Sessions step (3) could not write (each logged, and counted by
  // gdn_snapshot_write_failures_total): they end with this process, so
  // gdn-server exits non-zero for them (kExitSessionsLost).
  int sessions_lost() const { return drain_report_.failed; }

  // --tokens_file: reads it again (SIGHUP in gdn-server). Calls that start
  // afterwards see the new tokens; on error the old ones stay in force.
  // FailedPrecondition without a tokens file. Any thread.
  absl::Status ReloadTokens();
  // Null without --tokens_file.
  const Authenticator* authenticator() const { return authenticator_.get(); }

  // The server's metrics; still readable after Shutdown, when the metrics
  // port is closed.
  const ServerMetrics& metrics() const { return *metrics_; }

 private:
  GdnServer() = default;
  void DrainToSnapshotDir();

  ServerConfig config_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<Authenticator> authenticator_;  // --tokens_file only
  std::unique_ptr<TenantMetrics> tenant_metrics_;  // --tokens_file only
  std::unique_ptr<SessionSnapshotDir> snapshot_dir_;  // --snapshot_dir only
  std::unique_ptr<DrainGate> drain_gate_;             // --snapshot_dir only
  SnapshotDrainReport drain_report_;
  std::unique_ptr<Engine> engine_;
  // After engine_: released first (its regions unmap through the backend).
  std::unique_ptr<RegionRegistry> regions_;
  std::unique_ptr<ChannelRegistry> channels_;
  std::unique_ptr<TenantGaugeRefresher> tenant_gauges_;  // --tokens_file only
  ServiceContext context_;
  std::unique_ptr<GdnServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<DrainListener> drain_listener_;  // --snapshot_dir, TCP only
  std::unique_ptr<HttpEndpoint> metrics_endpoint_;
  std::string grpc_address_;
  std::string metrics_address_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace gdn

#endif  // GDN_SERVER_GDN_SERVER_H_
