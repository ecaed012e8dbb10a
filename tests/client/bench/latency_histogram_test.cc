#include "client/bench/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gdn::client::bench {
namespace {

TEST(LatencyHistogramTest, BucketsContainTheirValues) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 20000; ++i) {
    // Log-uniform over 1 ns .. ~1e12 ns.
    const int64_t v = static_cast<int64_t>(std::exp(std::uniform_real_distribution<double>(0, 27.6)(rng)));
    const int b = LatencyHistogram::BucketOf(v);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, LatencyHistogram::NumBuckets());
    ASSERT_LE(LatencyHistogram::BucketLow(b), v);
    ASSERT_LT(v, LatencyHistogram::BucketLow(b) + LatencyHistogram::BucketWidth(b));
    // Relative width bounded by 2^(1 - precision bits).
    ASSERT_LE(static_cast<double>(LatencyHistogram::BucketWidth(b)),
              std::max(1.0, v * std::ldexp(1.0, 1 - LatencyHistogram::kPrecisionBits)));
  }
  // Consecutive buckets tile the line without gaps.
  for (int b = 0; b + 1 < LatencyHistogram::NumBuckets() - 1; ++b) {
    ASSERT_EQ(LatencyHistogram::BucketLow(b) + LatencyHistogram::BucketWidth(b),
              LatencyHistogram::BucketLow(b + 1));
  }
}

TEST(LatencyHistogramTest, PercentilesMatchSortedSamples) {
  std::mt19937_64 rng(2);
  std::lognormal_distribution<double> lat(std::log(2e5), 0.8);  // ~200 us
  std::vector<int64_t> samples;
  LatencyHistogram h;
  for (int i = 0; i < 50000; ++i) {
    const int64_t v = static_cast<int64_t>(lat(rng));
    samples.push_back(v);
    h.Record(v);
  }
  std::sort(samples.begin(), samples.end());
  EXPECT_EQ(h.count(), 50000);
  EXPECT_EQ(h.min(), samples.front());
  EXPECT_EQ(h.max(), samples.back());
  for (double p : {50.0, 90.0, 99.0, 99.9}) {
    const int64_t exact = samples[static_cast<size_t>(std::ceil(p / 100 * samples.size())) - 1];
    const double rel = std::abs(h.Percentile(p) - exact) / static_cast<double>(exact);
    EXPECT_LT(rel, 0.016) << "p" << p << " exact " << exact << " got " << h.Percentile(p);
  }
  EXPECT_EQ(h.Percentile(100), samples.back());
  double sum = 0;
  for (int64_t v : samples) sum += v;
  EXPECT_NEAR(h.mean(), sum / samples.size(), 1e-6 * sum / samples.size());
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverything) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> d(1000, 5000000);
  LatencyHistogram a, b, all;
  for (int i = 0; i < 3000; ++i) {
    const int64_t v = d(rng);
    (i % 3 == 0 ? a : b).Record(v);
    all.Record(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  for (double p : {1.0, 25.0, 50.0, 75.0, 99.0}) EXPECT_EQ(a.Percentile(p), all.Percentile(p));
  LatencyHistogram empty;
  EXPECT_EQ(empty.Percentile(50), 0);
  empty.Merge(all);
  EXPECT_EQ(empty.min(), all.min());
}

}  // namespace
}  // namespace gdn::client::bench
