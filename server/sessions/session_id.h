// What the server takes as a session id, checked wherever an id comes in
// (every RPC, every import chunk, every Forward sequence) so that no later
// message echoes an unbounded id: a 16 KiB id in an error message broke the
// call with a transport error (issue 21, defect 8).
#ifndef GDN_SERVER_SESSIONS_SESSION_ID_H_
#define GDN_SERVER_SESSIONS_SESSION_ID_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gdn {

inline constexpr size_t kMaxSessionIdBytes = 256;

// InvalidArgument for ids the server does not take (too long, control
// characters), naming `field` but never echoing the id. Empty ids pass:
// CreateSession and ForkSession's child take them as "server-generated".
absl::Status ValidateSessionId(absl::string_view id, absl::string_view field);

// The same, and empty is InvalidArgument too: for ids that must name a
// session (Forward's sequences, Describe, Close, Fork's parent, Export,
// Import).
absl::Status ValidateRequiredSessionId(absl::string_view id, absl::string_view field);

}  // namespace gdn

#endif  // GDN_SERVER_SESSIONS_SESSION_ID_H_
