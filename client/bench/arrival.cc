#include "client/bench/arrival.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace gdn::client::bench {

absl::StatusOr<ArrivalProcess> ArrivalProcess::Make(const std::string& kind, double rate,
                                                    double shape) {
  if (!(rate > 0) || !std::isfinite(rate)) {
    return absl::InvalidArgumentError(absl::StrCat("--rate must be > 0, got ", rate));
  }
  ArrivalProcess p;
  p.rate_ = rate;
  if (kind == "poisson") {
    p.shape_ = 1;
  } else if (kind == "gamma") {
    if (!(shape > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("--burstiness must be > 0, got ", shape));
    }
    p.shape_ = shape;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--arrival must be poisson or gamma, got '", kind, "'"));
  }
  return p;
}

double ArrivalProcess::NextGap(std::mt19937_64& rng) {
  // Gamma(k, theta) with k * theta = 1 / rate; k = 1 is exponential.
  return std::gamma_distribution<double>(shape_, 1.0 / (shape_ * rate_))(rng);
}

}  // namespace gdn::client::bench
