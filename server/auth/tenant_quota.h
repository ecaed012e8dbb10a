// Per-tenant quotas on sessions and state pages, checked on the engine
// thread against what the state cache holds at that moment (so sessions
// that expired or were evicted no longer count):
//   sessions     every session of the tenant; checked by CreateSession,
//                ForkSession and ImportSession;
//   state pages  per session: each layer with a state, each open draft's
//                extra states and each kept state (prefix reuse). A forked
//                session counts its pages even while it still shares them
//                with its parent (they are its own as soon as it writes).
//                Checked by ForkSession and ImportSession (the pages they
//                bring) and when a Forward call is admitted (the pages it
//                may add: a first state for a layer, draft or kept states).
// Calls admitted at the same moment are checked against the committed
// states, so concurrent calls may overshoot the page quota by their own new
// pages, never more. A refusal is RESOURCE_EXHAUSTED naming the quota, and
// changes nothing.
//
// Threading: engine thread only (they read the cache).
#ifndef GDN_SERVER_AUTH_TENANT_QUOTA_H_
#define GDN_SERVER_AUTH_TENANT_QUOTA_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "server/auth/tenant_scope.h"
#include "server/engine/forward_call.h"
#include "state_cache/state_cache.h"

namespace gdn {

class TenantMetrics;

struct TenantUsage {
  int64_t sessions = 0;
  int64_t state_pages = 0;
};

// The pages one session counts (see above).
int64_t SessionPages(const SessionInfo& info);

// The tenant's usage now (open scope: every session).
TenantUsage MeasureTenant(const StateCache& cache, const TenantScope& scope);
// Every tenant's usage, by name (the part of each id before the first '/';
// ids without one, from an open server, are not counted).
std::map<std::string, TenantUsage> MeasureTenants(const StateCache& cache);

// Before a new session of `scope`'s tenant that brings `new_pages` pages.
// OK when open or within quota. `metrics` (may be null) counts refusals.
absl::Status CheckNewSession(const StateCache& cache, const TenantScope& scope,
                             int64_t new_pages, TenantMetrics* metrics);
// Before a Forward call (sessions already scoped) is admitted.
absl::Status CheckForwardPages(const StateCache& cache, const TenantScope& scope,
                               const ForwardCall& call, TenantMetrics* metrics);

}  // namespace gdn

#endif  // GDN_SERVER_AUTH_TENANT_QUOTA_H_
