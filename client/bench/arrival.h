// Open-loop session arrivals: inter-arrival gaps of a Poisson process
// (exponential gaps) or of a gamma renewal process whose shape sets the
// burstiness (shape 1 = Poisson; < 1 burstier, > 1 more regular), both with
// mean 1 / rate. The same scheme as vLLM's serving benchmark.
#ifndef GDN_CLIENT_BENCH_ARRIVAL_H_
#define GDN_CLIENT_BENCH_ARRIVAL_H_

#include <random>
#include <string>

#include "absl/status/statusor.h"

namespace gdn::client::bench {

class ArrivalProcess {
 public:
  // kind "poisson" or "gamma"; rate > 0 arrivals/s; shape > 0 (gamma only).
  static absl::StatusOr<ArrivalProcess> Make(const std::string& kind, double rate, double shape);
  // The next gap in seconds.
  double NextGap(std::mt19937_64& rng);
  double rate() const { return rate_; }

 private:
  double rate_ = 1, shape_ = 1;
};

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_ARRIVAL_H_
