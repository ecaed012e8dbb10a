// Whether a Forward call may start now, must wait, or fails: the
// per-(session, layer) position rule. Pure; the engine thread supplies the
// state of each key.
//
// A call's sequence at `position` for (session, layer):
//   - unknown session                        -> NOT_FOUND
//   - position < expected                    -> FAILED_PRECONDITION, naming
//     the expected position (a retry of work already applied or admitted)
//   - position > expected, or the state busy -> wait (parked) until earlier
//     calls fill the gap or the deadline passes
//   - position == expected and the state free-> may run
// where expected = stored position + tokens of the call now running on it.
// A call runs only when every one of its sequences may run (all or nothing).
//
// Speculative drafts (a sequence marked draft, 2..8 tokens): once a draft of
// T tokens after position p is stored (open), the next call chooses how
// many were accepted by its position: p + 1 .. p + T may run (the engine
// accepts first: StateCache::AcceptDraft); any other position is
// FAILED_PRECONDITION naming that range. While the draft call itself runs,
// positions in that range wait for it; a retry of it (position <= p) is
// refused naming the range too.
#ifndef GDN_SERVER_ENGINE_ADMISSION_H_
#define GDN_SERVER_ENGINE_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/engine/forward_call.h"

namespace gdn {

struct KeyState {
  bool session_exists = false;
  int64_t stored_position = 0;
  bool busy = false;           // a running call holds its lease
  int64_t running_tokens = 0;  // tokens of that call (0 when free)
  bool running_draft = false;  // that call's sequence is a draft
  int32_t open_draft_tokens = 0;  // a stored, uncommitted draft (0: none)
};

enum class AdmissionAction { kRun, kWait, kReject };

struct AdmissionDecision {
  AdmissionAction action = AdmissionAction::kWait;
  absl::Status status;  // set for kReject
};

AdmissionDecision DecideAdmission(
    int32_t layer, const std::vector<ForwardSequence>& sequences,
    const std::function<KeyState(const std::string& session)>& key_state);

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_ADMISSION_H_
