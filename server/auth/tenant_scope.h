// Whose sessions a call may touch. With a tokens file every call has a
// tenant and every session id it names is scoped to it: inside the server
// (state cache, engine, snapshot directory) the session "chat-1" of tenant
// "alice" is "alice/chat-1". A tenant can therefore only ever name its own
// sessions: another tenant's "chat-1" is a different key, and asking for it
// is NOT_FOUND exactly like an id nobody has (no hint it exists). Tenant
// names never contain '/', so the mapping is unambiguous whatever the
// session id holds.
//
// Without a tokens file the scope is open: ids are used as they come (the
// server's behaviour before tenants), and regions / channels have owner "".
//
// The internal id must stay within kMaxSessionIdBytes (snapshot files carry
// it and are checked against that limit), so a tenant's ids are shorter by
// its prefix: 256 - (name length + 1) bytes.
//
// Immutable; safe from any thread.
#ifndef GDN_SERVER_AUTH_TENANT_SCOPE_H_
#define GDN_SERVER_AUTH_TENANT_SCOPE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/auth/tenant.h"

namespace gdn {

class TenantScope {
 public:
  TenantScope() = default;  // open
  explicit TenantScope(std::shared_ptr<const Tenant> tenant);

  bool open() const { return tenant_ == nullptr; }
  // Null when open.
  const Tenant* tenant() const { return tenant_.get(); }
  // The owner of the caller's regions and channels: the tenant's name, ""
  // when open.
  const std::string& owner() const { return owner_; }

  // The id the server keeps for the caller's `id`, and back.
  std::string Inward(absl::string_view id) const;
  std::string Outward(absl::string_view internal) const;
  // Whether an internal id is one of the caller's sessions (always when open).
  bool Owns(absl::string_view internal) const;

  // ValidateSessionId / ValidateRequiredSessionId with this scope's limit.
  absl::Status ValidateId(absl::string_view id, absl::string_view field) const;
  absl::Status ValidateRequiredId(absl::string_view id, absl::string_view field) const;
  size_t max_id_bytes() const;

  // `status` as the caller may see it: internal ids quoted in its message
  // ("session 'alice/chat-1' ...") shown as the caller's ("'chat-1'").
  absl::Status Outward(const absl::Status& status) const;

 private:
  std::shared_ptr<const Tenant> tenant_;
  std::string owner_;   // tenant name or ""
  std::string prefix_;  // "name/" or ""
};

}  // namespace gdn

#endif  // GDN_SERVER_AUTH_TENANT_SCOPE_H_
