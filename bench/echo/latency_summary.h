// Exact percentiles of a list of call latencies (nearest rank on the sorted
// samples), for gdn-min-client: it keeps every sample, so nothing is binned.
#ifndef GDN_BENCH_ECHO_LATENCY_SUMMARY_H_
#define GDN_BENCH_ECHO_LATENCY_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gdn::echo {

struct LatencySummary {
  int64_t count = 0;
  double mean_us = 0, min_us = 0, p50_us = 0, p90_us = 0, p99_us = 0, max_us = 0;
};

// `nanos` is sorted in place. All zeros when empty.
LatencySummary Summarize(std::vector<int64_t>& nanos);

// {"count": .., "mean_us": .., "p50_us": .., ...}
std::string LatencySummaryJson(const LatencySummary& s);

}  // namespace gdn::echo

#endif  // GDN_BENCH_ECHO_LATENCY_SUMMARY_H_
