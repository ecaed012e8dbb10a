#include "server/engine/admission.h"

#include "absl/strings/str_cat.h"

namespace gdn {

AdmissionDecision DecideAdmission(
    int32_t layer, const std::vector<ForwardSequence>& sequences,
    const std::function<KeyState(const std::string& session)>& key_state) {
  std::vector<KeyState> states;
  states.reserve(sequences.size());
  for (size_t i = 0; i < sequences.size(); ++i) {
    states.push_back(key_state(sequences[i].session));
    if (!states.back().session_exists) {
      return {AdmissionAction::kReject,
              absl::NotFoundError(absl::StrCat(
                  "sequences[", i, "]: session '", sequences[i].session,
                  "' not found"))};
    }
  }
  bool wait = false;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const KeyState& s = states[i];
    const int64_t expected = s.stored_position + s.running_tokens;
    // The positions a draft leaves to choose from: (first - 1, last].
    const int64_t draft_tokens =
        s.running_draft ? s.running_tokens : s.busy ? 0 : s.open_draft_tokens;
    if (draft_tokens > 0) {
      const int64_t last = s.running_draft ? expected : s.stored_position;
      const int64_t first = last - draft_tokens + 1;
      const int64_t position = sequences[i].position;
      if (position >= first && position <= last) {
        if (s.busy) wait = true;
        continue;
      }
      if (position < first || !s.running_draft) {
        return {AdmissionAction::kReject,
                absl::FailedPreconditionError(absl::StrCat(
                    "sequences[", i, "]: session '", sequences[i].session, "' layer ", layer,
                    " has an uncommitted draft of ", draft_tokens, " tokens after position ",
                    first - 1, "; got position ", position, " (allowed positions [", first,
                    ", ", last, "]: ", first - 1, " + accepted tokens)"))};
      }
      wait = true;  // past a running draft: decided once it is stored
      continue;
    }
    if (sequences[i].position < expected) {
      return {AdmissionAction::kReject,
              absl::FailedPreconditionError(absl::StrCat(
                  "sequences[", i, "]: session '", sequences[i].session,
                  "' layer ", layer, " is at position ", expected,
                  "; got position ", sequences[i].position,
                  " (expected position ", expected, ")"))};
    }
    if (sequences[i].position > expected || s.busy) wait = true;
  }
  return {wait ? AdmissionAction::kWait : AdmissionAction::kRun,
          absl::OkStatus()};
}

}  // namespace gdn
