// Performance (seed 000, section 6.2 / 6.3): time per call (mean, P50 / P95 /
// P99 over many runs after warm-up), tokens/s, scaling efficiency over
// lengths, the same total tokens as few long vs many short sequences, backend
// memory and its growth with length, achieved bytes/s and FLOP/s against the
// ceilings measured in the same run.
//
// Timing: host clock around (call + Synchronize), inputs staged once outside
// the timed region. On cuda this includes the launch overhead of each call.
#ifndef GDN_BENCH_EVAL_EVAL_PERFORMANCE_H_
#define GDN_BENCH_EVAL_EVAL_PERFORMANCE_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "bench/eval/eval_context.h"
#include "bench/eval/json_value.h"

namespace gdn::eval {

// Times `call` (which must end with the backend synchronised): warm-up runs,
// then at least grid.min_runs and at most grid.max_runs, stopping once
// grid.seconds_per_config of timed runs is spent. Seconds per run.
struct Timing {
  absl::Status status;
  std::vector<double> seconds;
  int warmup = 0;
};
Timing TimeRuns(const Grid& grid, const std::function<absl::Status()>& call);

// Time-per-call summary, JSON {"n", "mean", "stddev", "min", "p50", "p95",
// "p99", "max"} in seconds.
Json SummaryJson(const std::vector<double>& seconds);

// The largest prefill that ran (for the stability section's "70% of the
// longest length that fits").
struct LargestPrefill {
  int batch = 0, length = 0, head_dim = 0;
  DType input = DType::kBF16;
  StateDType state = StateDType::kF32;
};

// Appends Markdown. JSON: {"method", "ceilings", "prefill", "scaling",
// "memory_growth", "decode", "same_total_tokens"}.
Json RunPerformance(EvalContext& ctx, LargestPrefill* largest);

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_EVAL_PERFORMANCE_H_
