#include "server/sessions/session_id.h"

#include "absl/strings/str_cat.h"

namespace gdn {

absl::Status ValidateSessionId(absl::string_view id, absl::string_view field) {
  if (id.size() > kMaxSessionIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": at most ", kMaxSessionIdBytes, " bytes, got ", id.size()));
  }
  for (char c : id) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": control characters are not allowed"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateRequiredSessionId(absl::string_view id, absl::string_view field) {
  if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": must not be empty"));
  return ValidateSessionId(id, field);
}

}  // namespace gdn
