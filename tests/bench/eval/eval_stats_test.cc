// gdn-eval's pure helpers: percentiles, summaries, scaling steps, drift,
// slope, and the JSON writer. Inputs are fresh random samples; expected
// values are computed independently here (sorting, direct formulas).
#include "bench/eval/eval_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bench/eval/json_value.h"
#include "gtest/gtest.h"

namespace gdn::eval {
namespace {

std::vector<double> RandomSample(std::mt19937_64& rng, size_t n) {
  std::lognormal_distribution<double> dist(0.0, 0.5);
  std::vector<double> v(n);
  for (double& e : v) e = dist(rng);
  return v;
}

TEST(PercentileTest, EndpointsAreMinAndMax) {
  std::mt19937_64 rng(std::random_device{}());
  for (size_t n : {1u, 2u, 7u, 100u}) {
    std::vector<double> v = RandomSample(rng, n);
    std::sort(v.begin(), v.end());
    EXPECT_EQ(Percentile(v, 0), v.front());
    EXPECT_EQ(Percentile(v, 100), v.back());
  }
}

TEST(PercentileTest, ExactRanksNeedNoInterpolation) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<double> v = RandomSample(rng, 101);  // rank = p exactly
  std::sort(v.begin(), v.end());
  for (int p : {1, 50, 95, 99}) EXPECT_DOUBLE_EQ(Percentile(v, p), v[p]);
}

TEST(PercentileTest, InterpolatesBetweenNeighbours) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<double> v = RandomSample(rng, 2);
  std::sort(v.begin(), v.end());
  // rank = 0.25 * (2 - 1): a quarter of the way from v[0] to v[1].
  EXPECT_NEAR(Percentile(v, 25), v[0] + 0.25 * (v[1] - v[0]), 1e-12);
}

TEST(SummarizeTest, OrderedAndConsistentWithTheSample) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<double> v = RandomSample(rng, 500);
  const Summary s = Summarize(v);
  double sum = 0;
  for (double e : v) sum += e;
  EXPECT_EQ(s.n, 500);
  EXPECT_NEAR(s.mean, sum / v.size(), 1e-12);
  EXPECT_EQ(s.min, *std::min_element(v.begin(), v.end()));
  EXPECT_EQ(s.max, *std::max_element(v.begin(), v.end()));
  EXPECT_LE(s.min, s.p50);
  EXPECT_LE(s.p50, s.p95);
  EXPECT_LE(s.p95, s.p99);
  EXPECT_LE(s.p99, s.max);
  EXPECT_GT(s.stddev, 0);
}

TEST(SummarizeTest, EmptyIsZero) {
  const Summary s = Summarize({});
  EXPECT_EQ(s.n, 0);
  EXPECT_EQ(s.mean, 0);
}

TEST(ScalingStepsTest, LinearTimesGiveEfficiencyOne) {
  std::mt19937_64 rng(std::random_device{}());
  const double per_token = std::uniform_real_distribution<double>(1e-9, 1e-6)(rng);
  const std::vector<int64_t> lengths = {512, 4096, 16384, 65536, 131072};
  std::vector<double> times, quadratic;
  for (int64_t l : lengths) {
    times.push_back(per_token * l);
    quadratic.push_back(per_token * l * l);
  }
  const std::vector<ScalingStep> steps = ScalingSteps(lengths, times);
  ASSERT_EQ(steps.size(), lengths.size() - 1);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].from_length, lengths[i]);
    EXPECT_EQ(steps[i].to_length, lengths[i + 1]);
    EXPECT_NEAR(steps[i].time_ratio, steps[i].length_ratio, 1e-9);
    EXPECT_NEAR(steps[i].efficiency, 1.0, 1e-9);
  }
  // Quadratic cost: efficiency = the length ratio itself (> 1).
  for (const ScalingStep& s : ScalingSteps(lengths, quadratic)) {
    EXPECT_NEAR(s.efficiency, s.length_ratio, 1e-9);
    EXPECT_GT(s.efficiency, 1.0);
  }
}

TEST(DriftRatioTest, FlatSeriesIsOneAndSlowdownShows) {
  std::mt19937_64 rng(std::random_device{}());
  const double base = std::uniform_real_distribution<double>(0.1, 10)(rng);
  std::vector<double> flat(9, base), slower(9, base);
  for (size_t i = 6; i < 9; ++i) slower[i] = 2 * base;
  EXPECT_NEAR(DriftRatio(flat), 1.0, 1e-12);
  EXPECT_NEAR(DriftRatio(slower), 2.0, 1e-12);
  EXPECT_EQ(DriftRatio({base, 3 * base}), 1.0);  // too short to say
}

TEST(SlopeTest, RecoversALine) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> u(-100, 100);
  const double a = u(rng), b = u(rng);
  std::vector<double> x, y;
  for (int i = 0; i < 10; ++i) {
    x.push_back(u(rng));
    y.push_back(a * x.back() + b);
  }
  EXPECT_NEAR(Slope(x, y), a, 1e-9 * (1 + std::fabs(a)));
  EXPECT_EQ(Slope({1, 1, 1}, {1, 2, 3}), 0);
}

TEST(JsonTest, WritesNestedValuesAndEscapes) {
  Json j = Json::Object();
  j.Set("name", "a\"b\n").Set("n", 3).Set("x", 0.5).Set("ok", true);
  j.Set("list", Json::Array().Push(1).Push(2.5)).Set("none", Json());
  j.Set("inf", std::numeric_limits<double>::infinity());
  j.Set("n", 4);  // replaces, keeps position
  const std::string s = j.Dump(-1);
  EXPECT_EQ(s, "{\"name\":\"a\\\"b\\n\",\"n\":4,\"x\":0.5,\"ok\":true,"
               "\"list\":[1, 2.5],\"none\":null,\"inf\":null}");
}

}  // namespace
}  // namespace gdn::eval
