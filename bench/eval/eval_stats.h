// Pure statistics of gdn-eval: latency summaries (mean, percentiles), scaling
// steps between lengths, drift between the start and the end of a series.
// No I/O, no backend: unit-tested in tests/bench/eval_stats_test.cc.
#ifndef GDN_BENCH_EVAL_EVAL_STATS_H_
#define GDN_BENCH_EVAL_EVAL_STATS_H_

#include <cstdint>
#include <vector>

namespace gdn::eval {

// Percentile p in [0, 100] of `sorted` (ascending, non-empty) with linear
// interpolation between closest ranks (numpy's default): rank = p/100 (n-1).
double Percentile(const std::vector<double>& sorted, double p);

// Summary of a sample of times (any unit). Empty sample: all zero, n = 0.
struct Summary {
  int64_t n = 0;
  double mean = 0, stddev = 0, min = 0, p50 = 0, p95 = 0, p99 = 0, max = 0;
};
Summary Summarize(std::vector<double> values);

// One step of a length sweep: how much longer the time got when the length
// grew. efficiency = time_ratio / length_ratio: 1 is linear, < 1 is better
// than linear (fixed costs amortised), > 1 is super-linear.
struct ScalingStep {
  int64_t from_length = 0, to_length = 0;
  double length_ratio = 0, time_ratio = 0, efficiency = 0;
};
// lengths ascending, times[i] the time at lengths[i] (> 0). One step per
// consecutive pair.
std::vector<ScalingStep> ScalingSteps(const std::vector<int64_t>& lengths,
                                      const std::vector<double>& times);

// Drift of a series in run order: mean of the last third over the mean of
// the first third (1 = no drift). Fewer than 3 values: 1.
double DriftRatio(const std::vector<double>& series);

// Least-squares slope of y over x (0 when x is constant or n < 2): memory
// growth in bytes per token when x = lengths and y = peak bytes.
double Slope(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_EVAL_STATS_H_
