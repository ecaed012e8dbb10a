#include "client/bench/stability.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace gdn::client::bench {
namespace {

double ChangePct(double a, double b) {
  const double hi = std::max(std::abs(a), std::abs(b));
  return hi == 0 ? 0 : 100.0 * std::abs(a - b) / hi;
}

}  // namespace

StabilityVerdict CheckStability(const std::vector<WindowSummary>& windows, double tolerance_pct) {
  StabilityVerdict v;
  v.windows = windows;
  if (windows.size() < 2) return v;
  v.checked = true;
  for (size_t i = 1; i < windows.size(); ++i) {
    v.max_throughput_change_pct = std::max(
        v.max_throughput_change_pct, ChangePct(windows[i - 1].calls_per_s, windows[i].calls_per_s));
    v.max_p99_change_pct =
        std::max(v.max_p99_change_pct, ChangePct(windows[i - 1].p99_ms, windows[i].p99_ms));
  }
  v.stable = v.max_throughput_change_pct <= tolerance_pct && v.max_p99_change_pct <= tolerance_pct;
  return v;
}

std::string StabilityVerdict::ToString() const {
  if (!checked) {
    return absl::StrFormat("not checked (%d full window%s; run longer or set --window_s)",
                           windows.size(), windows.size() == 1 ? "" : "s");
  }
  return absl::StrFormat("%s over %d windows (throughput changed up to %.1f%%, P99 up to %.1f%%)",
                         stable ? "stable" : "UNSTABLE", windows.size(),
                         max_throughput_change_pct, max_p99_change_pct);
}

}  // namespace gdn::client::bench
