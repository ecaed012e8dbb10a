#include "server/auth/authenticator.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace gdn {

absl::string_view BearerToken(absl::string_view authorization) {
  constexpr absl::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kScheme.size()), kScheme) ||
      authorization[kScheme.size()] != ' ') {
    return "";
  }
  return absl::StripAsciiWhitespace(authorization.substr(kScheme.size()));
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Create(std::string tokens_file,
                                                                     TenantQuotas defaults) {
  std::unique_ptr<Authenticator> auth(new Authenticator(std::move(tokens_file), defaults));
  if (absl::Status s = auth->Reload(); !s.ok()) return s;
  return auth;
}

absl::Status Authenticator::Reload() {
  absl::StatusOr<TokenTable> table = TokenTable::Read(path_, defaults_);
  if (!table.ok()) return table.status();
  auto shared = std::make_shared<const TokenTable>(std::move(*table));
  std::lock_guard<std::mutex> lock(mu_);
  table_ = std::move(shared);
  return absl::OkStatus();
}

std::shared_ptr<const TokenTable> Authenticator::table() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_;
}

absl::StatusOr<std::shared_ptr<const Tenant>> Authenticator::Authenticate(
    absl::string_view authorization) const {
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "this server needs a bearer token: send metadata 'authorization: Bearer <token>'");
  }
  const absl::string_view token = BearerToken(authorization);
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "the authorization metadata must be 'Bearer <token>'");
  }
  std::shared_ptr<const Tenant> tenant = table()->Find(token);
  if (tenant == nullptr) return absl::UnauthenticatedError("unknown bearer token");
  return tenant;
}

}  // namespace gdn
