// Session commands over the StateCache, run on the engine thread (through
// Engine::RunSessionCommand), translated to and from gdn.v1 messages.
#ifndef GDN_SERVER_SESSIONS_SESSION_OPS_H_
#define GDN_SERVER_SESSIONS_SESSION_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gdn/v1/gdn.pb.h"
#include "server/sessions/session_id.h"
#include "server/sessions/session_transfer.h"
#include "state_cache/state_cache.h"

namespace gdn {

// A fresh id ("s-" + 32 hex digits) no session of `cache` has.
std::string GenerateSessionId(const StateCache& cache);

// `requested_id` empty: the server picks one. AlreadyExists when taken.
absl::StatusOr<std::string> CreateSessionOp(StateCache& cache,
                                            const std::string& requested_id);
// With `at_position`, the child starts from the parent's kept states there
// (StateCache::ForkSessionAt).
absl::StatusOr<std::string> ForkSessionOp(StateCache& cache,
                                          const std::string& parent,
                                          const std::string& child,
                                          std::optional<int64_t> at_position = std::nullopt);
absl::StatusOr<gdn::v1::DescribeSessionResponse> DescribeSessionOp(
    const StateCache& cache, const std::string& id, absl::Time now);
// Every layer's state as host bytes (zero states empty).
absl::StatusOr<SessionStates> ExportSessionOp(StateCache& cache,
                                              const std::string& id);
// Creates `states.session_id` and imports every layer, all or nothing: on
// any failure the new session is closed again. AlreadyExists when taken.
absl::Status ImportSessionOp(StateCache& cache, const SessionStates& states);

}  // namespace gdn

#endif  // GDN_SERVER_SESSIONS_SESSION_OPS_H_
