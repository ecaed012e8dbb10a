#include "client/bench/merge_results.h"

#include <algorithm>

namespace gdn::client::bench {

BenchResult MergeTurns(const std::vector<BenchResult>& turns, double stability_pct) {
  BenchResult total = turns.front();
  std::vector<WindowSummary> windows = total.stability.windows;
  for (size_t i = 1; i < turns.size(); ++i) {
    const BenchResult& t = turns[i];
    total.measured.Merge(t.measured);
    total.warmup.Merge(t.warmup);
    total.rpcs.Merge(t.rpcs);
    total.windows.insert(total.windows.end(), t.windows.begin(), t.windows.end());
    windows.insert(windows.end(), t.stability.windows.begin(), t.stability.windows.end());
    total.elapsed_s += t.elapsed_s;
    total.measured_s += t.measured_s;
    total.client_load.cpu_s += t.client_load.cpu_s;
    total.client_load.wall_s += t.client_load.wall_s;
    total.schedule_lag.Merge(t.schedule_lag);
    total.late_starts += t.late_starts;
    for (const auto& [method, n] : t.retries) total.retries[method] += n;
    for (const std::string& b : t.client_bottleneck) {
      if (std::find(total.client_bottleneck.begin(), total.client_bottleneck.end(), b) ==
          total.client_bottleneck.end()) {
        total.client_bottleneck.push_back(b);
      }
    }
  }
  total.stability = CheckStability(windows, stability_pct);
  return total;
}

}  // namespace gdn::client::bench
