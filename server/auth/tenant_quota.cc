#include "server/auth/tenant_quota.h"

#include "absl/strings/str_cat.h"
#include "server/auth/tenant_metrics.h"

namespace gdn {
namespace {

absl::Status Refuse(const TenantScope& scope, absl::string_view quota, int64_t limit,
                    absl::string_view detail, TenantMetrics* metrics) {
  if (metrics != nullptr) metrics->CountQuotaRefusal(scope.owner(), quota);
  return absl::ResourceExhaustedError(absl::StrCat("tenant quota ", quota, " (", limit,
                                                   ") reached for tenant '", scope.owner(),
                                                   "': ", detail));
}

// Pages a call may add for one sequence, before it runs.
int64_t NewPages(const StateCache& cache, const ForwardSequence& seq, int32_t layer) {
  int64_t pages = 0;
  absl::StatusOr<int64_t> position = cache.Position(seq.session, layer);
  if (position.ok() && *position == 0) pages += 1;  // the layer's first state
  if (seq.draft) pages += seq.num_tokens - 1;       // a state after each token
  if (seq.checkpoint_interval > 0) {
    const int64_t first = (seq.position / seq.checkpoint_interval + 1) * seq.checkpoint_interval;
    const int64_t end = seq.position + seq.num_tokens;
    if (first < end) pages += (end - 1 - first) / seq.checkpoint_interval + 1;
  }
  return pages;
}

}  // namespace

int64_t SessionPages(const SessionInfo& info) {
  int64_t pages = 0;
  for (const LayerStateInfo& layer : info.layers) {
    if (layer.has_state) pages += 1;
    if (layer.draft_tokens > 1) pages += layer.draft_tokens - 1;
    pages += static_cast<int64_t>(layer.kept_positions.size());
  }
  return pages;
}

TenantUsage MeasureTenant(const StateCache& cache, const TenantScope& scope) {
  TenantUsage usage;
  for (const std::string& id : cache.ListSessions()) {
    if (!scope.Owns(id)) continue;
    ++usage.sessions;
    absl::StatusOr<SessionInfo> info = cache.DescribeSession(id);
    if (info.ok()) usage.state_pages += SessionPages(*info);
  }
  return usage;
}

std::map<std::string, TenantUsage> MeasureTenants(const StateCache& cache) {
  std::map<std::string, TenantUsage> out;
  for (const std::string& id : cache.ListSessions()) {
    const size_t slash = id.find('/');
    if (slash == std::string::npos || slash == 0) continue;
    TenantUsage& usage = out[id.substr(0, slash)];
    ++usage.sessions;
    absl::StatusOr<SessionInfo> info = cache.DescribeSession(id);
    if (info.ok()) usage.state_pages += SessionPages(*info);
  }
  return out;
}

absl::Status CheckNewSession(const StateCache& cache, const TenantScope& scope,
                             int64_t new_pages, TenantMetrics* metrics) {
  const Tenant* tenant = scope.tenant();
  if (tenant == nullptr) return absl::OkStatus();
  const TenantQuotas& q = tenant->quotas;
  if (q.max_sessions == 0 && q.max_state_pages == 0) return absl::OkStatus();
  const TenantUsage usage = MeasureTenant(cache, scope);
  if (q.max_sessions > 0 && usage.sessions + 1 > q.max_sessions) {
    return Refuse(scope, "max_sessions", q.max_sessions,
                  absl::StrCat("it holds ", usage.sessions, " sessions; close one first"),
                  metrics);
  }
  if (q.max_state_pages > 0 && new_pages > 0 &&
      usage.state_pages + new_pages > q.max_state_pages) {
    return Refuse(scope, "max_state_pages", q.max_state_pages,
                  absl::StrCat("its sessions reference ", usage.state_pages,
                               " state pages and this session brings ", new_pages),
                  metrics);
  }
  return absl::OkStatus();
}

absl::Status CheckForwardPages(const StateCache& cache, const TenantScope& scope,
                               const ForwardCall& call, TenantMetrics* metrics) {
  const Tenant* tenant = scope.tenant();
  if (tenant == nullptr || tenant->quotas.max_state_pages == 0) return absl::OkStatus();
  int64_t added = 0;
  for (const ForwardSequence& seq : call.sequences) added += NewPages(cache, seq, call.layer);
  if (added == 0) return absl::OkStatus();  // the common decode step: no scan
  const int64_t limit = tenant->quotas.max_state_pages;
  const TenantUsage usage = MeasureTenant(cache, scope);
  if (usage.state_pages + added <= limit) return absl::OkStatus();
  return Refuse(scope, "max_state_pages", limit,
                absl::StrCat("its sessions reference ", usage.state_pages,
                             " state pages and this call may add ", added,
                             "; close or shrink sessions first"),
                metrics);
}

}  // namespace gdn
