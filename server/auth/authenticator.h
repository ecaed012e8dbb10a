// Bearer-token authentication: the `authorization: Bearer <token>` header of
// a call -> its tenant, through the tokens file (tokens_file.h).
//
// Reload (SIGHUP in gdn-server) reads the file again and swaps the table in
// whole: calls that start afterwards see only the new tokens, calls already
// past authentication finish as the tenant they started as. A file that
// does not parse leaves the old table in place (the error is returned for
// the log). Sessions belong to tenant names, not tokens: a retired token
// loses access, the tenant's sessions stay its own for its other tokens.
//
// Threading: every method is safe from any thread.
#ifndef GDN_SERVER_AUTH_AUTHENTICATOR_H_
#define GDN_SERVER_AUTH_AUTHENTICATOR_H_

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/auth/tenant.h"
#include "server/auth/tokens_file.h"

namespace gdn {

class Authenticator {
 public:
  // Reads `tokens_file` (an error when it does not parse: the server must
  // not start with no tokens it meant to have).
  static absl::StatusOr<std::unique_ptr<Authenticator>> Create(std::string tokens_file,
                                                               TenantQuotas defaults);

  // `authorization`: the header's value, "" when absent. UNAUTHENTICATED
  // when missing, malformed or unknown (the message never echoes a token).
  absl::StatusOr<std::shared_ptr<const Tenant>> Authenticate(
      absl::string_view authorization) const;

  // Re-reads the file; the old table stays on error.
  absl::Status Reload();

  const std::string& path() const { return path_; }
  // The table in force now.
  std::shared_ptr<const TokenTable> table() const;

 private:
  Authenticator(std::string path, TenantQuotas defaults)
      : path_(std::move(path)), defaults_(defaults) {}

  const std::string path_;
  const TenantQuotas defaults_;
  mutable std::mutex mu_;
  std::shared_ptr<const TokenTable> table_;  // guarded by mu_
};

// The token of an "authorization" header value: "Bearer <token>" (the scheme
// in any case, one or more spaces); "" when it is not a bearer credential.
absl::string_view BearerToken(absl::string_view authorization);

}  // namespace gdn

#endif  // GDN_SERVER_AUTH_AUTHENTICATOR_H_
