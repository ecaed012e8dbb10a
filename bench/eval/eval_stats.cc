#include "bench/eval/eval_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gdn::eval {

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * (sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - lo;
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

Summary Summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.n = static_cast<int64_t>(values.size());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / s.n;
  double var = 0;
  for (double v : values) var += (v - s.mean) * (v - s.mean);
  s.stddev = s.n > 1 ? std::sqrt(var / (s.n - 1)) : 0.0;
  s.min = values.front();
  s.max = values.back();
  s.p50 = Percentile(values, 50);
  s.p95 = Percentile(values, 95);
  s.p99 = Percentile(values, 99);
  return s;
}

std::vector<ScalingStep> ScalingSteps(const std::vector<int64_t>& lengths,
                                      const std::vector<double>& times) {
  std::vector<ScalingStep> steps;
  const size_t n = std::min(lengths.size(), times.size());
  for (size_t i = 1; i < n; ++i) {
    ScalingStep step;
    step.from_length = lengths[i - 1];
    step.to_length = lengths[i];
    step.length_ratio = double(lengths[i]) / double(lengths[i - 1]);
    step.time_ratio = times[i - 1] > 0 ? times[i] / times[i - 1] : 0.0;
    step.efficiency = step.time_ratio / step.length_ratio;
    steps.push_back(step);
  }
  return steps;
}

double DriftRatio(const std::vector<double>& series) {
  const size_t n = series.size();
  if (n < 3) return 1.0;
  const size_t third = n / 3;
  double first = 0, last = 0;
  for (size_t i = 0; i < third; ++i) {
    first += series[i];
    last += series[n - third + i];
  }
  return first > 0 ? last / first : 1.0;
}

double Slope(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 2) return 0;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= n;
  my /= n;
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  return sxx > 0 ? sxy / sxx : 0.0;
}

}  // namespace gdn::eval
