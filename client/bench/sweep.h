// Several runs of one workload at different loads: a sweep over concurrency
// (closed loop) or rate (open loop), or the SLO search (slo_search.h) over
// one of them. Each point is a full RunBench with its own warm-up and
// windows; the points' reports go into one JSON / CSV for plot_report.py.
#ifndef GDN_CLIENT_BENCH_SWEEP_H_
#define GDN_CLIENT_BENCH_SWEEP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/bench/slo_search.h"
#include "client/bench/workload.h"

namespace gdn::client::bench {

enum class LoadKind { kConcurrency, kRate };

// "concurrency:1,2,4,8" or "rate:5,10,20".
struct SweepSpec {
  LoadKind kind = LoadKind::kConcurrency;
  std::vector<double> loads;
};
absl::StatusOr<SweepSpec> ParseSweep(const std::string& text);

// "concurrency:MIN:MAX" or "rate:MIN:MAX" (the SLO search's range).
struct LoadRange {
  LoadKind kind = LoadKind::kConcurrency;
  double min = 1, max = 64;
};
absl::StatusOr<LoadRange> ParseLoadRange(const std::string& text);

const char* LoadKindName(LoadKind kind);  // "concurrency" / "rate"
// `base` with the load set (closed loop with `sessions`, or open with `rate`).
BenchConfig AtLoad(const BenchConfig& base, LoadKind kind, double load);

struct SweepResult {
  LoadKind kind = LoadKind::kConcurrency;
  std::vector<double> loads;
  std::vector<BenchResult> points;
  // SLO search only.
  bool slo = false;
  double slo_p99_ms = 0;
  std::string slo_phase;
  SloSearchResult search;
};

absl::StatusOr<SweepResult> RunSweep(const BenchConfig& base, const SweepSpec& spec);
absl::StatusOr<SweepResult> RunSloSearch(const BenchConfig& base, const LoadRange& range,
                                         double slo_p99_ms, const std::string& phase,
                                         int max_probes);

std::string FormatSweepText(const SweepResult& s);
std::string FormatSweepJson(const SweepResult& s);
std::string FormatSweepCsv(const SweepResult& s);

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_SWEEP_H_
