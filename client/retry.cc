#include "client/retry.h"

#include <algorithm>
#include <cmath>

#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace gdn::client {
namespace {

double Jitter() {  // uniform in [0.5, 1)
  static absl::Mutex mu(absl::kConstInit);
  static absl::BitGen* gen = nullptr;
  absl::MutexLock lock(&mu);
  if (gen == nullptr) gen = new absl::BitGen();
  return absl::Uniform<double>(*gen, 0.5, 1.0);
}

}  // namespace

bool IsRetryable(const absl::Status& status) { return absl::IsUnavailable(status); }

absl::Duration RetryBackoff(const RetryPolicy& policy, int attempt) {
  const double factor = std::pow(std::max(1.0, policy.multiplier), std::max(0, attempt - 1));
  const absl::Duration d = policy.initial_backoff * std::min(factor, 1e6);
  return std::min(d, policy.max_backoff);
}

absl::Status CallWithRetry(const RetryPolicy& policy, const RetryObserver& observer,
                           absl::string_view method,
                           const std::function<absl::Status(int attempt)>& call) {
  const absl::Time give_up = absl::Now() + policy.max_total;
  for (int attempt = 1;; ++attempt) {
    absl::Status status = call(attempt);
    if (!IsRetryable(status) || attempt >= policy.max_attempts) return status;
    const absl::Duration wait = RetryBackoff(policy, attempt) * Jitter();
    if (absl::Now() + wait > give_up) return status;
    if (observer) observer(method, status, attempt);
    absl::SleepFor(wait);
  }
}

}  // namespace gdn::client
