// A Forward call (RPC, stream or channel) made the caller's: its sequences'
// session ids become the tenant's internal ids (tenant_scope.h), and its
// admission checks the tenant's state-page quota (tenant_quota.h). Nothing
// changes for an open scope.
#ifndef GDN_SERVER_AUTH_SCOPED_FORWARD_CALL_H_
#define GDN_SERVER_AUTH_SCOPED_FORWARD_CALL_H_

#include "absl/status/status.h"
#include "server/auth/tenant_metrics.h"
#include "server/auth/tenant_scope.h"
#include "server/engine/forward_call.h"

namespace gdn {

// InvalidArgument when a session id is too long for the tenant
// ("sequences[2].session_id: at most 250 bytes for this tenant"); the call
// is unchanged then. `metrics` may be null.
absl::Status ScopeForwardCall(const TenantScope& scope, TenantMetrics* metrics,
                              ForwardCall* call);

}  // namespace gdn

#endif  // GDN_SERVER_AUTH_SCOPED_FORWARD_CALL_H_
