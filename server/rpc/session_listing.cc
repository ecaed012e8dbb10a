#include "server/rpc/session_listing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/sessions/session_id.h"

namespace gdn {

absl::StatusOr<gdn::v1::ListSessionsResponse> ListSessionsPage(
    std::vector<std::string> internal_ids, const TenantScope& scope,
    const gdn::v1::ListSessionsRequest& request) {
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be >= 0, got ", request.page_size()));
  }
  if (absl::Status s = ValidateSessionId(request.page_token(), "page_token"); !s.ok()) return s;
  const size_t page_size = request.page_size() == 0
                               ? kMaxListPageSize
                               : std::min(request.page_size(), kMaxListPageSize);
  std::vector<std::string> ids;
  for (std::string& id : internal_ids) {
    if (!scope.Owns(id)) continue;
    std::string external = scope.Outward(id);
    if (!request.page_token().empty() && external <= request.page_token()) continue;
    ids.push_back(std::move(external));
  }
  std::sort(ids.begin(), ids.end());
  gdn::v1::ListSessionsResponse response;
  for (size_t i = 0; i < ids.size() && i < page_size; ++i) response.add_session_ids(ids[i]);
  if (ids.size() > page_size) response.set_next_page_token(ids[page_size - 1]);
  return response;
}

}  // namespace gdn
