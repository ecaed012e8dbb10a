#include "server/auth/tenant_scope.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "server/sessions/session_id.h"

namespace gdn {

TenantScope::TenantScope(std::shared_ptr<const Tenant> tenant) : tenant_(std::move(tenant)) {
  if (tenant_ != nullptr) {
    owner_ = tenant_->name;
    prefix_ = absl::StrCat(tenant_->name, "/");
  }
}

std::string TenantScope::Inward(absl::string_view id) const {
  return absl::StrCat(prefix_, id);
}

std::string TenantScope::Outward(absl::string_view internal) const {
  absl::ConsumePrefix(&internal, prefix_);
  return std::string(internal);
}

bool TenantScope::Owns(absl::string_view internal) const {
  return absl::StartsWith(internal, prefix_);
}

size_t TenantScope::max_id_bytes() const { return kMaxSessionIdBytes - prefix_.size(); }

absl::Status TenantScope::ValidateId(absl::string_view id, absl::string_view field) const {
  if (absl::Status s = ValidateSessionId(id, field); !s.ok()) return s;
  if (id.size() > max_id_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": at most ", max_id_bytes(),
                                                   " bytes for this tenant, got ", id.size()));
  }
  return absl::OkStatus();
}

absl::Status TenantScope::ValidateRequiredId(absl::string_view id,
                                             absl::string_view field) const {
  if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": must not be empty"));
  return ValidateId(id, field);
}

absl::Status TenantScope::Outward(const absl::Status& status) const {
  if (status.ok() || prefix_.empty()) return status;
  const std::string quoted = absl::StrCat("'", prefix_);
  if (!absl::StrContains(status.message(), quoted)) return status;
  return absl::Status(status.code(), absl::StrReplaceAll(status.message(), {{quoted, "'"}}));
}

}  // namespace gdn
