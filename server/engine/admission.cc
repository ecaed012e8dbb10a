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
