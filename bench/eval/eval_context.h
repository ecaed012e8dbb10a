// What every gdn-eval section shares: the backend under test, the grid, the
// flags, the run's deadline, and small helpers that turn results into report
// JSON (status of a run, error statistics, the operator options).
#ifndef GDN_BENCH_EVAL_EVAL_CONTEXT_H_
#define GDN_BENCH_EVAL_EVAL_CONTEXT_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "bench/eval/eval_config.h"
#include "bench/eval/json_value.h"
#include "kernels/backend.h"
#include "kernels/gdn_types.h"
#include "kernels/testing/error_stats.h"

namespace gdn::eval {

using Clock = std::chrono::steady_clock;

struct EvalContext {
  Backend* backend = nullptr;
  const Grid* grid = nullptr;
  const EvalFlags* flags = nullptr;
  Clock::time_point deadline;  // past it, remaining work is recorded as skipped
  std::string markdown;        // the report's Markdown, appended by sections

  bool TimeLeft() const { return Clock::now() < deadline; }
  double SecondsLeft() const {
    return std::chrono::duration<double>(deadline - Clock::now()).count();
  }
};

double SecondsSince(Clock::time_point start);

// Hqk = Hv = heads, K = V = head_dim, direct gating, in-kernel L2 norm.
GdnOptions EvalOptions(int heads, int head_dim, DType input, StateDType state);

// How a run ended, as the report records it:
//   "ok", "resource_limit" (ResourceExhausted: out of memory at this size; a
//   limit of the environment, not a defect), "unsupported" (Unimplemented /
//   the backend's Supports said no), "error" (anything else),
//   "skipped_time_budget" (not run: the run's time budget was spent).
std::string Outcome(const absl::Status& status);
inline constexpr char kSkippedTimeBudget[] = "skipped_time_budget";

// {"outcome": ..., "message": ...} (message only when not ok).
Json StatusJson(const absl::Status& status);
Json ErrorJson(const testing::ErrorStats& stats);
Json OptionsJson(const GdnOptions& options);

// "1.23e-04"-style and fixed formatting for the Markdown tables.
std::string Sci(double v);
std::string Fixed(double v, int decimals);

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_EVAL_CONTEXT_H_
