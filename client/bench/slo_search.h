// The search for the highest load whose P99 meets a latency objective,
// separate from any server so it can be unit-tested on a synthetic load
// curve. Assumes P99 grows with load (a queue does): steps up from
// min_load, doubling, until the objective fails or max_load passes; then
// bisects between the last load that met it and the first that did not,
// until they are within `resolution` (absolute; integer loads such as
// concurrency use 1) or max_probes measurements were made.
#ifndef GDN_CLIENT_BENCH_SLO_SEARCH_H_
#define GDN_CLIENT_BENCH_SLO_SEARCH_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"

namespace gdn::client::bench {

struct SloSearchOptions {
  double min_load = 1;
  double max_load = 1024;
  bool integer_load = true;  // concurrency: whole numbers only
  double resolution = 1;     // stop bisecting when hi - lo <= resolution
  int max_probes = 12;
};

struct SloProbe {
  double load = 0;
  double p99_ms = 0;
  bool meets = false;
};

struct SloSearchResult {
  double best_load = 0;       // 0: even min_load missed the objective
  int best_probe = -1;        // index into probes
  bool converged = false;     // bracket within resolution, or max_load met it
  std::vector<SloProbe> probes;  // in the order measured
};

// `measure(load)` runs the load and returns its P99 in ms; an error stops
// the search and is returned.
absl::StatusOr<SloSearchResult> SearchSlo(const SloSearchOptions& options, double slo_p99_ms,
                                          const std::function<absl::StatusOr<double>(double)>& measure);

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_SLO_SEARCH_H_
