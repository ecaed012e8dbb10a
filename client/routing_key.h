// Session affinity through a proxy: which server a session lives on is chosen
// by a consistent hash of its routing key, sent on every RPC that names a
// session as the metadata header `x-gdn-route` (nginx: `hash
// $http_x_gdn_route consistent`; Envoy: ring hash on the header; see
// deploy/README.md, "Scale it").
//
// The key of a session id is the part before its first '/', or the whole id
// when it has none: "tenant7/chat-3" -> "tenant7", "chat-3" -> "chat-3".
// Sessions that must share a server (those of one multi-session Forward, a
// fork's parent and child) are given ids with a common prefix; a plain id
// routes alone. This file is the one place the rule is written in code; the
// proxy configurations in deploy/ only hash the header.
//
// Ids are chosen by the client when going through a proxy (a server-picked id
// would be unknown to the proxy when the session is created): NewSessionId.
#ifndef GDN_CLIENT_ROUTING_KEY_H_
#define GDN_CLIENT_ROUTING_KEY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdn::client {

// The metadata key (gRPC metadata keys are lower case).
inline constexpr char kRouteHeader[] = "x-gdn-route";

// The routing key of a session id (see above). Empty for an empty id.
std::string RoutingKey(absl::string_view session_id);

// The header value for a key: the key itself when it is printable ASCII
// without '%' (gRPC metadata values must be), else every other byte as %XX.
// Deterministic, so the proxy's hash sees the same value for the same key.
std::string RouteHeaderValue(absl::string_view key);

// The one routing key of several sessions (a multi-session Forward, a fork):
// InvalidArgument naming the ids when their keys differ (they may live on
// different servers, and one call reaches one server). Empty list: "".
absl::StatusOr<std::string> CommonRoutingKey(const std::vector<std::string>& session_ids);

// A fresh, unique id: "g-<24 hex digits>" (random), or "<group>/s-<24 hex
// digits>" when `group` is given, so that every id made with the same group
// routes to the same server. `group` must not contain '/'.
std::string NewSessionId(absl::string_view group = "");

// A fresh group name ("r-<16 hex digits>") for NewSessionId.
std::string NewRouteGroup();

}  // namespace gdn::client

#endif  // GDN_CLIENT_ROUTING_KEY_H_
