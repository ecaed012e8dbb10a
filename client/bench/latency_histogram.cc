#include "client/bench/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace gdn::client::bench {
namespace {

constexpr int kP = LatencyHistogram::kPrecisionBits;
constexpr int64_t kExact = int64_t{1} << kP;      // values below are exact buckets
constexpr int64_t kHalf = int64_t{1} << (kP - 1);  // sub-buckets per power of two above

int Log2Floor(uint64_t v) { return 63 - __builtin_clzll(v); }

}  // namespace

// Layout: buckets [0, 2^P) hold the values 0 .. 2^P - 1 exactly. Above, a
// value with highest set bit e (e >= P) keeps its top P bits m in
// [2^(P-1), 2^P): bucket 2^P + (e - P) * 2^(P-1) + (m - 2^(P-1)), width
// 2^(e - P + 1).
int LatencyHistogram::BucketOf(int64_t nanos) {
  if (nanos < kExact) return static_cast<int>(std::max<int64_t>(0, nanos));
  const int e = Log2Floor(static_cast<uint64_t>(nanos));
  const int64_t m = nanos >> (e - kP + 1);
  return static_cast<int>(kExact + (e - kP) * kHalf + (m - kHalf));
}

int64_t LatencyHistogram::BucketLow(int bucket) {
  if (bucket < kExact) return bucket;
  const int64_t r = bucket - kExact;
  const int e = static_cast<int>(r / kHalf) + kP;
  const int64_t m = r % kHalf + kHalf;
  return m << (e - kP + 1);
}

int64_t LatencyHistogram::BucketWidth(int bucket) {
  if (bucket < kExact) return 1;
  const int e = static_cast<int>((bucket - kExact) / kHalf) + kP;
  return int64_t{1} << (e - kP + 1);
}

int LatencyHistogram::NumBuckets() { return BucketOf(INT64_MAX) + 1; }

LatencyHistogram::LatencyHistogram() : counts_(NumBuckets(), 0) {}

void LatencyHistogram::Record(int64_t nanos) {
  nanos = std::max<int64_t>(0, nanos);
  ++counts_[BucketOf(nanos)];
  min_ = count_ == 0 ? nanos : std::min(min_, nanos);
  max_ = std::max(max_, nanos);
  sum_ += nanos;
  ++count_;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
  count_ += other.count_;
}

int64_t LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  p = std::clamp(p, 0.0, 100.0);
  if (p == 100.0) return max_;  // exact, not a bucket's midpoint
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(p / 100.0 * count_)));
  int64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const int b = static_cast<int>(i);
      const int64_t mid = BucketLow(b) + (BucketWidth(b) - 1) / 2;
      return std::clamp(mid, min(), max());
    }
  }
  return max_;
}

}  // namespace gdn::client::bench
