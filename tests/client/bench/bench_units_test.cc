// gdn-bench's pure pieces: length specs, traces, arrivals, the stability
// check, the SLO search on synthetic load curves, sweep flags and the
// parsing of the server's metrics.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/bench/arrival.h"
#include "client/bench/length_spec.h"
#include "client/bench/server_metrics.h"
#include "client/bench/slo_search.h"
#include "client/bench/stability.h"
#include "client/bench/sweep.h"
#include "client/bench/trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn::client::bench {
namespace {

using ::testing::HasSubstr;

uint64_t FreshSeed() { return std::random_device{}(); }

TEST(LengthSpecTest, ParsesEveryFormAndSamplesWithinIt) {
  std::mt19937_64 rng(FreshSeed());
  const int a = std::uniform_int_distribution<int>(1, 100)(rng);
  const int b = a + std::uniform_int_distribution<int>(1, 100)(rng);

  absl::StatusOr<LengthSpec> fixed = LengthSpec::Parse(absl::StrCat(a), "x");
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_TRUE(fixed->is_fixed());
  EXPECT_EQ(fixed->Sample(rng), a);

  for (const std::string& text : {absl::StrCat(a, ":", b), absl::StrCat("uniform:", a, ":", b)}) {
    absl::StatusOr<LengthSpec> range = LengthSpec::Parse(text, "x");
    ASSERT_TRUE(range.ok()) << text << " " << range.status();
    double sum = 0;
    int lo = b, hi = a;
    for (int i = 0; i < 4000; ++i) {
      const int v = range->Sample(rng);
      ASSERT_GE(v, a);
      ASSERT_LE(v, b);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    EXPECT_EQ(lo, a);
    EXPECT_EQ(hi, b);
    EXPECT_NEAR(sum / 4000, (a + b) / 2.0, 0.1 * (b - a) + 0.5);
    EXPECT_EQ(range->UpperBound(), b);
  }

  absl::StatusOr<LengthSpec> normal = LengthSpec::Parse(absl::StrCat("normal:", b, ":", a / 4.0), "x", 1);
  ASSERT_TRUE(normal.ok());
  double sum = 0;
  for (int i = 0; i < 4000; ++i) {
    const int v = normal->Sample(rng);
    ASSERT_GE(v, 1);
    sum += v;
  }
  EXPECT_NEAR(sum / 4000, b, 0.05 * b + 1);

  absl::StatusOr<LengthSpec> lognormal = LengthSpec::Parse(absl::StrCat("lognormal:", b, ":0.5"), "x");
  ASSERT_TRUE(lognormal.ok());
  std::vector<int> samples;
  for (int i = 0; i < 4001; ++i) samples.push_back(lognormal->Sample(rng));
  std::nth_element(samples.begin(), samples.begin() + 2000, samples.end());
  EXPECT_NEAR(samples[2000], b, 0.1 * b + 1);  // the median
}

TEST(LengthSpecTest, RejectsMalformedText) {
  for (const char* bad : {"", "abc", "5:2", "-3", "1.5", "normal:5", "zipf:1:2", "lognormal:0:1",
                          "1:2:3", "normal:5:-1"}) {
    absl::StatusOr<LengthSpec> s = LengthSpec::Parse(bad, "prefill_tokens");
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("--prefill_tokens")) << bad;
  }
}

TEST(TraceTest, JsonlAndCsvRoundTripSorted) {
  std::mt19937_64 rng(FreshSeed());
  std::vector<TraceRecord> records;
  for (int i = 0; i < 20; ++i) {
    records.push_back({std::uniform_real_distribution<double>(0, 10)(rng),
                       std::uniform_int_distribution<int>(1, 500)(rng),
                       std::uniform_int_distribution<int>(0, 50)(rng)});
  }
  std::string jsonl = "# a comment\n", csv = "decode_steps,arrival_s,prefill_tokens\n";
  for (const TraceRecord& r : records) {
    jsonl += absl::StrFormat("{\"arrival_s\": %.17g, \"prefill_tokens\": %d, \"decode_steps\": %d}\n",
                             r.arrival_s, r.prefill_tokens, r.decode_steps);
    csv += absl::StrFormat("%d,%.17g,%d\n", r.decode_steps, r.arrival_s, r.prefill_tokens);
  }
  std::sort(records.begin(), records.end(),
            [](const TraceRecord& a, const TraceRecord& b) { return a.arrival_s < b.arrival_s; });
  for (bool is_csv : {false, true}) {
    absl::StatusOr<std::vector<TraceRecord>> parsed = ParseTrace(is_csv ? csv : jsonl, is_csv);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    ASSERT_EQ(parsed->size(), records.size());
    for (size_t i = 0; i < records.size(); ++i) {
      EXPECT_EQ((*parsed)[i].arrival_s, records[i].arrival_s);
      EXPECT_EQ((*parsed)[i].prefill_tokens, records[i].prefill_tokens);
      EXPECT_EQ((*parsed)[i].decode_steps, records[i].decode_steps);
    }
  }
  absl::StatusOr<std::vector<TraceRecord>> bad =
      ParseTrace("{\"arrival_s\": 1, \"prefill_tokens\": 2, \"decode_steps\": 3}\n{\"arrival_s\": 1}\n", false);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("line 2"));
}

TEST(ArrivalTest, GapsHaveTheRateAndTheShapesBurstiness) {
  std::mt19937_64 rng(FreshSeed());
  const double rate = std::uniform_real_distribution<double>(5, 500)(rng);
  auto moments = [&](ArrivalProcess p) {
    double sum = 0, sum2 = 0;
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      const double g = p.NextGap(rng);
      EXPECT_GE(g, 0);
      sum += g;
      sum2 += g * g;
    }
    const double mean = sum / n;
    return std::make_pair(mean, std::sqrt(sum2 / n - mean * mean) / mean);  // mean, CV
  };
  auto poisson = moments(*ArrivalProcess::Make("poisson", rate, 0));
  EXPECT_NEAR(poisson.first, 1 / rate, 0.03 / rate);
  EXPECT_NEAR(poisson.second, 1.0, 0.05);
  auto bursty = moments(*ArrivalProcess::Make("gamma", rate, 0.25));  // CV = 1 / sqrt(k) = 2
  EXPECT_NEAR(bursty.first, 1 / rate, 0.06 / rate);
  EXPECT_NEAR(bursty.second, 2.0, 0.2);
  EXPECT_FALSE(ArrivalProcess::Make("uniform", rate, 1).ok());
  EXPECT_FALSE(ArrivalProcess::Make("gamma", rate, 0).ok());
  EXPECT_FALSE(ArrivalProcess::Make("poisson", 0, 1).ok());
}

TEST(StabilityTest, FlagsWindowsThatDrift) {
  std::mt19937_64 rng(FreshSeed());
  const double tput = std::uniform_real_distribution<double>(100, 1000)(rng);
  const double p99 = std::uniform_real_distribution<double>(1, 10)(rng);
  std::vector<WindowSummary> windows;
  for (int i = 0; i < 4; ++i) windows.push_back({tput * (1 + 0.05 * (i % 2)), p99 * (1 - 0.04 * (i % 2))});
  StabilityVerdict v = CheckStability(windows, 10);
  EXPECT_TRUE(v.checked);
  EXPECT_TRUE(v.stable) << v.ToString();
  windows[2].p99_ms = p99 * 1.5;
  v = CheckStability(windows, 10);
  EXPECT_FALSE(v.stable);
  EXPECT_NEAR(v.max_p99_change_pct, 100 * (1.5 - 0.96) / 1.5, 1e-6);
  EXPECT_THAT(v.ToString(), HasSubstr("UNSTABLE"));
  EXPECT_FALSE(CheckStability({windows[0]}, 10).checked);
}

TEST(SloSearchTest, FindsTheHighestIntegerLoadOfASyntheticCurve) {
  std::mt19937_64 rng(FreshSeed());
  for (int trial = 0; trial < 20; ++trial) {
    const double base = std::uniform_real_distribution<double>(0.5, 2)(rng);
    const double slope = std::uniform_real_distribution<double>(0.001, 0.1)(rng);
    const double slo = std::uniform_real_distribution<double>(base + 0.5, base + 50)(rng);
    auto p99 = [&](double load) { return base + slope * load * load; };
    // The answer: the largest integer load with p99 <= slo.
    const double expected = std::floor(std::sqrt((slo - base) / slope));
    SloSearchOptions o;
    o.min_load = 1;
    o.max_load = 4096;
    o.max_probes = 40;
    int calls = 0;
    absl::StatusOr<SloSearchResult> r = SearchSlo(o, slo, [&](double load) -> absl::StatusOr<double> {
      ++calls;
      EXPECT_EQ(load, std::round(load));
      return p99(load);
    });
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->converged);
    if (expected >= 1) {
      EXPECT_EQ(r->best_load, expected) << "base " << base << " slope " << slope << " slo " << slo;
      ASSERT_GE(r->best_probe, 0);
      EXPECT_LE(r->probes[r->best_probe].p99_ms, slo);
    } else {
      EXPECT_EQ(r->best_load, 0);
    }
    EXPECT_EQ(calls, static_cast<int>(r->probes.size()));
    EXPECT_LE(calls, 2 * static_cast<int>(std::log2(4096)) + 2);
  }
}

TEST(SloSearchTest, RateLoadsBracketWithinResolutionAndEdgesAreReported) {
  std::mt19937_64 rng(FreshSeed());
  const double knee = std::uniform_real_distribution<double>(3, 300)(rng);
  auto measure = [&](double load) -> absl::StatusOr<double> { return load < knee ? 5.0 : 500.0; };
  SloSearchOptions o;
  o.min_load = 1;
  o.max_load = 1000;
  o.integer_load = false;
  o.resolution = 0.5;
  o.max_probes = 40;
  absl::StatusOr<SloSearchResult> r = SearchSlo(o, 10, measure);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->converged);
  EXPECT_LT(r->best_load, knee);
  EXPECT_GT(r->best_load, knee - 0.5);
  // Every load meets it: the answer is max_load.
  r = SearchSlo(o, 1e9, measure);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->best_load, 1000);
  // None does.
  r = SearchSlo(o, 1, measure);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->best_load, 0);
  EXPECT_EQ(r->probes.size(), 1u);
  // A failed measurement stops the search with its status.
  r = SearchSlo(o, 10, [](double) -> absl::StatusOr<double> { return absl::UnavailableError("down"); });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

TEST(SweepFlagsTest, ParsesAndRejects) {
  absl::StatusOr<SweepSpec> s = ParseSweep("concurrency:1,2,4,8");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, LoadKind::kConcurrency);
  EXPECT_EQ(s->loads, (std::vector<double>{1, 2, 4, 8}));
  s = ParseSweep("rate:0.5,10");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, LoadKind::kRate);
  for (const char* bad : {"concurrency", "qps:1,2", "concurrency:1.5", "rate:-1", "rate:1,,2"}) {
    EXPECT_FALSE(ParseSweep(bad).ok()) << bad;
  }
  absl::StatusOr<LoadRange> r = ParseLoadRange("rate:2:40");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->min, 2);
  EXPECT_EQ(r->max, 40);
  EXPECT_FALSE(ParseLoadRange("rate:40:2").ok());
  EXPECT_FALSE(ParseLoadRange("concurrency:4").ok());
}

TEST(ServerMetricsTest, DiffsCountersHistogramsAndGauges) {
  std::mt19937_64 rng(FreshSeed());
  const int forwards0 = std::uniform_int_distribution<int>(0, 1000)(rng);
  const int forwards = std::uniform_int_distribution<int>(1, 1000)(rng);
  // Queue-time histogram: `forwards` new samples, all in (0.001, 0.002].
  auto text = [&](int f, int in_bucket, double sum, double spills) {
    return absl::StrFormat(
        "# HELP gdn_requests_total x\n# TYPE gdn_requests_total counter\n"
        "gdn_requests_total{method=\"Forward\",code=\"OK\"} %d\n"
        "gdn_requests_total{code=\"OK\",method=\"CreateSession\"} 3\n"
        "gdn_queue_duration_seconds_bucket{method=\"Forward\",le=\"0.001\"} 0\n"
        "gdn_queue_duration_seconds_bucket{method=\"Forward\",le=\"0.002\"} %d\n"
        "gdn_queue_duration_seconds_bucket{method=\"Forward\",le=\"+Inf\"} %d\n"
        "gdn_queue_duration_seconds_sum{method=\"Forward\"} %.9g\n"
        "gdn_queue_duration_seconds_count{method=\"Forward\"} %d\n"
        "gdn_batch_size_sum{phase=\"decode\"} %d\ngdn_batch_size_count{phase=\"decode\"} %d\n"
        "gdn_state_cache_bytes{tier=\"device\",state=\"used\"} %d\n"
        "gdn_state_spills_total %.0f\ngdn_sessions 2\n",
        f, in_bucket, in_bucket, sum, in_bucket, 4 * f, f, 1000 + f, spills);
  };
  const std::string before = text(forwards0, forwards0, 0.0015 * forwards0, 1);
  const std::string after = text(forwards0 + forwards, forwards0 + forwards,
                                 0.0015 * (forwards0 + forwards), 6);
  const ServerMetricsDelta d = DiffServerMetrics(before, after);
  EXPECT_EQ(d.Requests("Forward", "OK"), forwards);
  EXPECT_EQ(d.Requests("Forward"), forwards);
  EXPECT_EQ(d.Requests("CreateSession"), 0);
  ASSERT_TRUE(d.queue_s.count("Forward"));
  EXPECT_EQ(d.queue_s.at("Forward").count, forwards);
  EXPECT_NEAR(d.queue_s.at("Forward").mean(), 0.0015, 1e-9);
  EXPECT_GT(d.queue_s.at("Forward").p50, 0.001);
  EXPECT_LE(d.queue_s.at("Forward").p99, 0.002);
  EXPECT_NEAR(d.batch_size.at("decode").mean(), 4, 1e-9);
  EXPECT_EQ(d.cache_bytes_after.at("device/used"), 1000 + forwards0 + forwards);
  EXPECT_EQ(d.counters.at("spills"), 5);
  EXPECT_EQ(d.sessions_after, 2);
}

}  // namespace
}  // namespace gdn::client::bench
