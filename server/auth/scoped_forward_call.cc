#include "server/auth/scoped_forward_call.h"

#include "absl/strings/str_cat.h"
#include "server/auth/tenant_quota.h"

namespace gdn {

absl::Status ScopeForwardCall(const TenantScope& scope, TenantMetrics* metrics,
                              ForwardCall* call) {
  if (scope.open()) return absl::OkStatus();
  for (size_t i = 0; i < call->sequences.size(); ++i) {
    if (absl::Status s = scope.ValidateRequiredId(call->sequences[i].session,
                                                  absl::StrCat("sequences[", i, "].session_id"));
        !s.ok()) {
      return s;
    }
  }
  for (ForwardSequence& seq : call->sequences) seq.session = scope.Inward(seq.session);
  if (scope.tenant()->quotas.max_state_pages > 0) {
    call->admission_check = [scope, metrics](const StateCache& cache, const ForwardCall& c) {
      return CheckForwardPages(cache, scope, c, metrics);
    };
  }
  return absl::OkStatus();
}

}  // namespace gdn
