// The server's own view of a run: its Prometheus /metrics scraped before and
// after (a raw HTTP/1.0 GET, no library needed), turned into deltas of the
// counters and histograms and the gauges' final values:
//   requests by method and code, queue time (submit -> first kernel), batch
//   size and tokens per kernel call, kernel time, tokens per phase, state
//   cache bytes per tier, spills / restores / evictions / CoW copies.
#ifndef GDN_CLIENT_BENCH_SERVER_METRICS_H_
#define GDN_CLIENT_BENCH_SERVER_METRICS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gdn::client::bench {

// GET http://host_port/path; the body when the status is 200.
absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                                    double timeout_s = 5);

struct MetricSample {
  std::string name;                          // e.g. gdn_batch_size_sum
  std::map<std::string, std::string> labels;
  double value = 0;
};
// Sample lines of the text exposition format (comments skipped).
std::vector<MetricSample> ParsePrometheusText(const std::string& text);

// Mean and quantiles of a histogram's increase between two scrapes, in the
// histogram's unit. Quantiles interpolate linearly inside the bucket.
struct HistogramDelta {
  double count = 0, sum = 0;
  double mean() const { return count > 0 ? sum / count : 0; }
  double p50 = 0, p99 = 0;
};

struct ServerMetricsDelta {
  std::map<std::string, std::map<std::string, double>> requests;  // method -> code -> delta
  std::map<std::string, HistogramDelta> queue_s;        // method -> queue time (s)
  std::map<std::string, HistogramDelta> batch_size;     // phase -> sequences per kernel call
  std::map<std::string, HistogramDelta> batch_tokens;   // phase -> tokens per kernel call
  std::map<std::string, HistogramDelta> kernel_s;       // phase -> kernel time (s)
  // phase -> the host part of a batch's launch (s); empty from servers
  // before gdn_batch_staging_seconds.
  std::map<std::string, HistogramDelta> staging_s;
  std::map<std::string, double> tokens;                 // phase -> tokens run
  std::map<std::string, double> cache_bytes_after;      // "tier/state" -> bytes
  std::map<std::string, double> counters;  // spills, restores, evictions, expired, cow_copies
  double sessions_after = 0;

  double Requests(const std::string& method, const std::string& code = "") const;
};

ServerMetricsDelta DiffServerMetrics(const std::string& before, const std::string& after);

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_SERVER_METRICS_H_
