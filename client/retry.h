// Retry of calls the server did not apply: UNAVAILABLE only, with bounded
// exponential backoff. A draining gdn-server answers UNAVAILABLE ("draining")
// for every call it did not apply, then saves its sessions and closes its
// listener; the proxy then sends the session's calls to the next server,
// which restores the session on first use (deploy/README.md, "Scale it").
// A proxy that cannot reach any server answers UNAVAILABLE too. Every other
// code is returned at once: a retry of FAILED_PRECONDITION, NOT_FOUND, ...
// would only fail again.
//
// Used by every GdnClient call (and so by Session and gdn-bench). A
// ForwardStream is not retried here: a broken stream ends with UNAVAILABLE,
// and its user opens a new one and resends what was not answered.
#ifndef GDN_CLIENT_RETRY_H_
#define GDN_CLIENT_RETRY_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gdn::client {

struct RetryPolicy {
  // Tries in all, the first included; 1 disables retries.
  int max_attempts = 12;
  // The wait before the second try; each later wait is `multiplier` times the
  // previous one, at most `max_backoff`, each jittered to 50..100%.
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
  double multiplier = 2.0;
  // No new try starts once this long has passed since the first began (the
  // default rides out a drain: UNAVAILABLE until the listener closes).
  absl::Duration max_total = absl::Seconds(10);
};

// Told of every failed try that will be retried: the method ("Forward", ...),
// the try's status and its number (1 = the first try).
using RetryObserver =
    std::function<void(absl::string_view method, const absl::Status& status, int attempt)>;

// True for the codes a retry may fix (UNAVAILABLE).
bool IsRetryable(const absl::Status& status);

// The wait after try `attempt` (1-based), before jitter.
absl::Duration RetryBackoff(const RetryPolicy& policy, int attempt);

// Runs `call` (given the 1-based try number) until it returns a status that
// is not retryable, or the policy's tries or time run out; returns the last
// status. `observer` may be empty.
absl::Status CallWithRetry(const RetryPolicy& policy, const RetryObserver& observer,
                           absl::string_view method,
                           const std::function<absl::Status(int attempt)>& call);

}  // namespace gdn::client

#endif  // GDN_CLIENT_RETRY_H_
