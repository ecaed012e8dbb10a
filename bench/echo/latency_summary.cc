#include "bench/echo/latency_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_format.h"

namespace gdn::echo {
namespace {

// The smallest sample with at least p% of the samples at or below it.
double NearestRank(const std::vector<int64_t>& sorted, double p) {
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::max<size_t>(rank, 1) - 1] / 1e3;
}

}  // namespace

LatencySummary Summarize(std::vector<int64_t>& nanos) {
  LatencySummary s;
  if (nanos.empty()) return s;
  std::sort(nanos.begin(), nanos.end());
  s.count = static_cast<int64_t>(nanos.size());
  s.mean_us = std::accumulate(nanos.begin(), nanos.end(), 0.0) / nanos.size() / 1e3;
  s.min_us = nanos.front() / 1e3;
  s.max_us = nanos.back() / 1e3;
  s.p50_us = NearestRank(nanos, 50);
  s.p90_us = NearestRank(nanos, 90);
  s.p99_us = NearestRank(nanos, 99);
  return s;
}

std::string LatencySummaryJson(const LatencySummary& s) {
  return absl::StrFormat(
      "{\"count\": %d, \"mean_us\": %.3f, \"min_us\": %.3f, \"p50_us\": %.3f, \"p90_us\": %.3f, "
      "\"p99_us\": %.3f, \"max_us\": %.3f}",
      s.count, s.mean_us, s.min_us, s.p50_us, s.p90_us, s.p99_us, s.max_us);
}

}  // namespace gdn::echo
