// The admission gate of a drain to a snapshot directory (--snapshot_dir).
//
// Every call that names or creates a session Enter()s before it hands work to
// the engine and Leave()s once that work is done (its engine callback ran).
// BeginDrain() closes the gate: from then on Enter() fails with UNAVAILABLE
// "draining", so a call that was refused was never handed to the engine and
// changed nothing. WaitIdle() then waits until every call that did enter has
// left, after which the engine holds no unfinished work for any session and
// the states can be written out.
//
// Threading: every method is safe from any thread.
#ifndef GDN_SERVER_SESSIONS_DRAIN_GATE_H_
#define GDN_SERVER_SESSIONS_DRAIN_GATE_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gdn {

class DrainGate {
 public:
  // OK: the caller must Leave() exactly once later. Unavailable ("draining")
  // once BeginDrain() has run; then the caller must not Leave().
  absl::Status Enter();
  void Leave();

  // Closes the gate (idempotent).
  void BeginDrain();
  bool draining() const;
  // True when no entered call is left, false when `deadline` came first.
  bool WaitIdle(absl::Time deadline);
  int64_t in_flight() const;

 private:
  mutable absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gdn

#endif  // GDN_SERVER_SESSIONS_DRAIN_GATE_H_
