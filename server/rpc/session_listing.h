// ListSessions' answer: the caller's own sessions (its tenant's, or every
// one when the scope is open), sorted by id, one page at a time. The page
// token is the last id of the previous page, so a listing walks on
// correctly while sessions come and go (each id that exists throughout is
// listed exactly once). Pure; any thread.
#ifndef GDN_SERVER_RPC_SESSION_LISTING_H_
#define GDN_SERVER_RPC_SESSION_LISTING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gdn/v1/gdn.pb.h"
#include "server/auth/tenant_scope.h"

namespace gdn {

inline constexpr int kMaxListPageSize = 1000;

// `internal_ids`: every session the cache holds (any order). InvalidArgument
// for a negative page_size or a page token no listing gave.
absl::StatusOr<gdn::v1::ListSessionsResponse> ListSessionsPage(
    std::vector<std::string> internal_ids, const TenantScope& scope,
    const gdn::v1::ListSessionsRequest& request);

}  // namespace gdn

#endif  // GDN_SERVER_RPC_SESSION_LISTING_H_
