#include "server/sessions/drain_gate.h"

namespace gdn {

absl::Status DrainGate::Enter() {
  absl::MutexLock lock(&mu_);
  if (draining_) {
    return absl::UnavailableError(
        "draining: this server is handing its sessions to the snapshot "
        "directory and takes no new session calls; retry on another server");
  }
  ++in_flight_;
  return absl::OkStatus();
}

void DrainGate::Leave() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

void DrainGate::BeginDrain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool DrainGate::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

bool DrainGate::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  bool (*idle)(int64_t*) = [](int64_t* n) { return *n == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(idle, &in_flight_), deadline);
}

int64_t DrainGate::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace gdn
