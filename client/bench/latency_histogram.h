// A latency histogram of every sample, HdrHistogram-style: log-linear buckets
// with 2^kPrecisionBits sub-buckets per power of two, so any recorded value is
// known to within 1 / 2^(kPrecisionBits - 1) (< 1.6%) of itself, from 1 ns to
// 2^63 ns, in a fixed ~3.7k counters. Percentiles come from the buckets;
// count, min, max and the sum are exact.
//
// Not thread-safe: each bench worker records into its own and the results are
// merged at the end.
#ifndef GDN_CLIENT_BENCH_LATENCY_HISTOGRAM_H_
#define GDN_CLIENT_BENCH_LATENCY_HISTOGRAM_H_

#include <cstdint>
#include <vector>

namespace gdn::client::bench {

class LatencyHistogram {
 public:
  static constexpr int kPrecisionBits = 7;

  LatencyHistogram();

  // A sample in nanoseconds (negative samples count as 0).
  void Record(int64_t nanos);
  void Merge(const LatencyHistogram& other);

  int64_t count() const { return count_; }
  int64_t min() const { return count_ == 0 ? 0 : min_; }
  int64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0.0 : static_cast<double>(sum_) / count_; }
  // The value at percentile p in [0, 100]: the smallest bucket whose
  // cumulative count reaches ceil(p / 100 * count), reported as the bucket's
  // midpoint clamped to [min, max]; p = 100 is the exact max. 0 when empty.
  int64_t Percentile(double p) const;

  // Bucket arithmetic, exposed for tests.
  static int BucketOf(int64_t nanos);
  static int64_t BucketLow(int bucket);    // smallest value in the bucket
  static int64_t BucketWidth(int bucket);  // values in the bucket
  static int NumBuckets();

 private:
  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
  int64_t sum_ = 0;
};

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_LATENCY_HISTOGRAM_H_
