// The stability check between measurement windows: a run is "stable" when
// every pair of consecutive full windows has throughput (Forward calls) and
// key-phase P99 within `tolerance_pct` of each other (relative to the larger
// of the two). The last window is dropped when the run ended inside it.
#ifndef GDN_CLIENT_BENCH_STABILITY_H_
#define GDN_CLIENT_BENCH_STABILITY_H_

#include <string>
#include <vector>

namespace gdn::client::bench {

struct WindowSummary {
  double calls_per_s = 0;
  double p99_ms = 0;
};

struct StabilityVerdict {
  bool checked = false;  // false: fewer than two full windows
  bool stable = false;
  double max_throughput_change_pct = 0;
  double max_p99_change_pct = 0;
  std::vector<WindowSummary> windows;  // the full windows compared
  std::string ToString() const;        // "stable", "unstable (...)", "not checked (...)"
};

StabilityVerdict CheckStability(const std::vector<WindowSummary>& windows, double tolerance_pct);

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_STABILITY_H_
