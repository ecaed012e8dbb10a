#include "client/bench/slo_search.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace gdn::client::bench {

absl::StatusOr<SloSearchResult> SearchSlo(const SloSearchOptions& o, double slo_p99_ms,
                                          const std::function<absl::StatusOr<double>(double)>& measure) {
  if (!(o.min_load > 0) || o.max_load < o.min_load || !(o.resolution > 0) || o.max_probes < 1) {
    return absl::InvalidArgumentError("SLO search needs 0 < min_load <= max_load, resolution > 0");
  }
  SloSearchResult r;
  auto probe = [&](double load) -> absl::StatusOr<bool> {
    if (o.integer_load) load = std::round(load);
    absl::StatusOr<double> p99 = measure(load);
    if (!p99.ok()) return p99.status();
    const bool meets = *p99 <= slo_p99_ms;
    r.probes.push_back({load, *p99, meets});
    if (meets && load > r.best_load) {
      r.best_load = load;
      r.best_probe = static_cast<int>(r.probes.size()) - 1;
    }
    return meets;
  };
  // Step up, doubling.
  double lo = 0, hi = 0;  // lo met the objective, hi did not (0: none yet)
  for (double load = o.min_load;; load = std::min(o.max_load, load * 2)) {
    if (static_cast<int>(r.probes.size()) >= o.max_probes) return r;
    absl::StatusOr<bool> meets = probe(load);
    if (!meets.ok()) return meets.status();
    if (!*meets) {
      hi = r.probes.back().load;
      break;
    }
    lo = r.probes.back().load;
    if (load >= o.max_load) {
      r.converged = true;  // the whole range meets it
      return r;
    }
  }
  if (lo == 0) {
    r.converged = true;  // even the smallest load misses it
    return r;
  }
  // Bisect (lo meets, hi misses).
  while (hi - lo > o.resolution) {
    if (static_cast<int>(r.probes.size()) >= o.max_probes) return r;
    double mid = (lo + hi) / 2;
    if (o.integer_load) {
      mid = std::floor(mid);
      if (mid <= lo) break;
    }
    absl::StatusOr<bool> meets = probe(mid);
    if (!meets.ok()) return meets.status();
    (*meets ? lo : hi) = r.probes.back().load;
  }
  r.converged = true;
  return r;
}

}  // namespace gdn::client::bench
