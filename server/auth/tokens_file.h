// The tokens file (--tokens_file): which bearer token belongs to which
// tenant, and the tenants' quotas. Plain text, one token per line:
//
//   # comments and blank lines are ignored
//   # TENANT  TOKEN                              [QUOTA=N ...]
//   alice     4f1c0e2a9b7d44e1a0c3f5d6e7a8b9c0   max_sessions=100 max_state_pages=7200
//   alice     a-second-token-for-rotation-0001
//   bob       0b8e6d4c2a1f3e5d7c9b0a2e4d6f8a1c
//
// Fields are separated by spaces or tabs. TENANT: 1..32 of [A-Za-z0-9_.-].
// TOKEN: 16..512 characters of RFC 6750's b64token set
// ([A-Za-z0-9-._~+/] then '=' padding), unique in the file. A tenant may
// have several tokens (rotation: add the new one, reload, retire the old
// one, reload). Quotas (0 = unlimited) may be given on any of a tenant's
// lines; lines that both give one must agree; unset ones take the server's
// defaults (--tenant_max_sessions, --tenant_max_state_pages).
//
// The table keeps SHA-256 digests of the tokens, not the tokens: a lookup
// hashes the presented token first, so its time does not depend on how
// much of a stored token it matches.
//
// Immutable after Parse: safe to share between threads.
#ifndef GDN_SERVER_AUTH_TOKENS_FILE_H_
#define GDN_SERVER_AUTH_TOKENS_FILE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/auth/tenant.h"

namespace gdn {

inline constexpr size_t kMinTokenBytes = 16;
inline constexpr size_t kMaxTokenBytes = 512;

class TokenTable {
 public:
  // InvalidArgument naming the line ("line 3: ...") of the first problem;
  // never echoes a token.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text,
                                          const TenantQuotas& defaults);
  // The same from a file (NotFound / PermissionDenied when unreadable).
  static absl::StatusOr<TokenTable> Read(const std::string& path,
                                         const TenantQuotas& defaults);

  // The tenant `token` belongs to; null when unknown.
  std::shared_ptr<const Tenant> Find(absl::string_view token) const;

  size_t num_tokens() const { return by_digest_.size(); }
  // Tenant names, sorted.
  std::vector<std::string> TenantNames() const;

 private:
  absl::flat_hash_map<std::string, std::shared_ptr<const Tenant>> by_digest_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Tenant>> tenants_;
};

// SHA-256 of `token`, 32 raw bytes.
std::string TokenDigest(absl::string_view token);

}  // namespace gdn

#endif  // GDN_SERVER_AUTH_TOKENS_FILE_H_
