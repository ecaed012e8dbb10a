#include "server/auth/tenant.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gdn {

absl::Status ValidateTenantName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxTenantNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a tenant name has 1..", kMaxTenantNameBytes, " characters, got ", name.size()));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' &&
        c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("tenant '", name, "': only [A-Za-z0-9_.-] are allowed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gdn
