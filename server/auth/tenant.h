// A tenant: the name a bearer token maps to (tokens_file.h), and its quotas.
// Every session, region and channel a tenant makes is its own: other
// tenants can neither see nor name it (tenant_scope.h).
#ifndef GDN_SERVER_AUTH_TENANT_H_
#define GDN_SERVER_AUTH_TENANT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gdn {

// Tenant names: 1..kMaxTenantNameBytes of [A-Za-z0-9_.-]. They become a
// prefix of the tenant's session ids inside the server and a metric label,
// so they are short and never contain the separator '/'.
inline constexpr size_t kMaxTenantNameBytes = 32;

// 0 means unlimited.
struct TenantQuotas {
  int64_t max_sessions = 0;
  // State pages the tenant's sessions reference (tenant_quota.h counts them).
  int64_t max_state_pages = 0;
};

struct Tenant {
  std::string name;
  TenantQuotas quotas;
};

// InvalidArgument naming what is wrong with `name`.
absl::Status ValidateTenantName(absl::string_view name);

}  // namespace gdn

#endif  // GDN_SERVER_AUTH_TENANT_H_
