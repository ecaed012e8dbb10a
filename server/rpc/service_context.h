// What every RPC handler and reactor of the service shares: the engine, the
// metrics and the fixed configuration. Read-only after start; the pointers
// outlive the gRPC server.
//
// Every GdnService call starts with ScopeOf: with a tokens file it
// authenticates the call's bearer token (UNAUTHENTICATED otherwise) and
// scopes what the call names to the caller's tenant (server/auth/); without
// one the scope is open.
#ifndef GDN_SERVER_RPC_SERVICE_CONTEXT_H_
#define GDN_SERVER_RPC_SERVICE_CONTEXT_H_

#include <grpcpp/server_context.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gdn/v1/gdn.pb.h"
#include "server/auth/authenticator.h"
#include "server/auth/tenant_metrics.h"
#include "server/auth/tenant_scope.h"
#include "server/channel/channel_registry.h"
#include "server/sessions/drain_gate.h"
#include "server/engine/engine.h"
#include "server/ops/metrics.h"
#include "server/ops/server_config.h"
#include "server/regions/region_registry.h"
#include "server/rpc/forward_request_reader.h"
#include "server/sessions/session_snapshot_dir.h"

namespace gdn {

struct ServiceContext {
  Engine* engine = nullptr;
  ServerMetrics* metrics = nullptr;  // may be null
  ServerConfig config;
  gdn::v1::LayerConfig layer_config;
  std::string version;
  // Both set only with --snapshot_dir (server/sessions/session_snapshot_dir.h).
  DrainGate* drain_gate = nullptr;
  SessionSnapshotDir* snapshot_dir = nullptr;
  // Same-host regions (server/regions/), owned by the caller's tenant
  // (TenantScope::owner(): "" when open).
  RegionRegistry* regions = nullptr;
  RegionAccess region_access;  // {regions, the backend, owner ""}
  // Same-host Forward channels (server/channel/), owned like regions.
  ChannelRegistry* channels = nullptr;
  // --tokens_file only: bearer tokens -> tenants, and metrics by tenant.
  const Authenticator* authenticator = nullptr;
  TenantMetrics* tenant_metrics = nullptr;

  // The caller's scope (open without a tokens file), or UNAUTHENTICATED.
  absl::StatusOr<TenantScope> ScopeOf(const grpc::CallbackServerContext& context) const;
  // region_access with the caller's tenant as owner.
  RegionAccess RegionAccessFor(const TenantScope& scope) const {
    RegionAccess access = region_access;
    access.owner = scope.owner();
    return access;
  }

  // Every call that names or creates a session: EnterCall() before handing
  // work to the engine (UNAVAILABLE "draining" once a drain began: the call
  // was not applied), LeaveCall() once that work is done.
  absl::Status EnterCall() const {
    return drain_gate != nullptr ? drain_gate->Enter() : absl::OkStatus();
  }
  void LeaveCall() const {
    if (drain_gate != nullptr) drain_gate->Leave();
  }
  // Engine thread, in session commands: brings `id` back from the snapshot
  // directory when this server does not hold it. OK also when there is
  // nothing to restore (the command's own NOT_FOUND follows).
  absl::Status RestoreIfAbsent(StateCache& cache, const std::string& id) const {
    if (snapshot_dir == nullptr || id.empty()) return absl::OkStatus();
    absl::Status s = snapshot_dir->RestoreIfAbsent(cache, id);
    return absl::IsNotFound(s) ? absl::OkStatus() : s;
  }
  // Any thread: AlreadyExists when a snapshot file still holds `id`.
  absl::Status CheckIdFree(const std::string& id) const {
    if (snapshot_dir == nullptr || id.empty()) return absl::OkStatus();
    return snapshot_dir->CheckIdFree(id);
  }

  void RecordRequest(absl::string_view method, const absl::Status& status,
                     absl::Time start) const {
    if (metrics != nullptr) {
      metrics->RecordRequest(method, status.code(), absl::Now() - start);
    }
  }
  // The same, and by tenant when the call has one.
  void RecordRequest(absl::string_view method, const absl::Status& status, absl::Time start,
                     const TenantScope& scope) const {
    RecordRequest(method, status, start);
    if (tenant_metrics != nullptr && !scope.open()) {
      tenant_metrics->RecordRequest(scope.owner(), method, status.code());
    }
  }
};

// The call's deadline as absl::Time (InfiniteFuture when none).
absl::Time DeadlineOf(const grpc::CallbackServerContext* context);

}  // namespace gdn

#endif  // GDN_SERVER_RPC_SERVICE_CONTEXT_H_
