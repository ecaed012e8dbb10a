#include "bench/eval/eval_baselines.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/eval/decode_chain.h"
#include "bench/eval/eval_performance.h"
#include "bench/eval/eval_stats.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/error_stats.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn::eval {
namespace {

// Max |a - b| / max |b| of two fp32 results.
double MaxAbsRel(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> ref(b.begin(), b.end());
  return testing::Compare(a.data(), ref.data(), ref.size()).max_abs_rel;
}

}  // namespace

Json RunBaselines(EvalContext& ctx) {
  const Grid& grid = *ctx.grid;
  Backend& backend = *ctx.backend;
  std::string& md = ctx.markdown;
  Json out = Json::Object();
  out.Set("note", "The float64 oracle (plain recurrence, one thread, double) is not timed: not a fair baseline. "
                  "chunked_vs_recurrent: one Prefill call vs L Decode calls of one token on the same inputs, "
                  "through the Backend interface. GPU baselines (softmax SDPA, FLA) come from gpu_baselines.py.");
  md += "## Baselines\n\n";
  md += "The float64 oracle is the plain recurrence in double precision on one thread: its speed is no fair "
        "baseline and is not timed. Through the Backend: one Prefill call over L tokens vs L Decode calls of one "
        "token (the server's decode loop) on the same inputs, both results compared. GPU baselines (PyTorch SDPA "
        "softmax attention, flash-linear-attention) come from `bench/eval/gpu_baselines.py` in the device run.\n\n";
  md += "| D | in | B | L | Prefill P50 | decode-loop P50 | decode-loop / Prefill | outputs max_abs_rel | outcome |\n";
  md += "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  Json rows = Json::Array();
  const int dim = grid.head_dims.back();
  const GdnOptions options = EvalOptions(grid.num_heads, dim, DType::kBF16, StateDType::kF32);
  Grid timing_grid = grid;  // fewer runs: a decode loop over L tokens is L calls
  timing_grid.warmup_runs = 1;
  timing_grid.min_runs = 3;
  timing_grid.max_runs = 10;
  uint64_t seed = ctx.flags->seed * 104729;
  for (int length : grid.recurrent_lengths) {
    Json row = Json::Object();
    row.Set("head_dim", dim).Set("input_dtype", "bf16").Set("state_dtype", "fp32")
        .Set("batch", grid.recurrent_batch).Set("length", length);
    if (!ctx.TimeLeft()) {
      row.Set("status", Json::Object().Set("outcome", kSkippedTimeBudget));
      rows.Push(row);
      md += absl::StrCat("| ", dim, " | bf16 | ", grid.recurrent_batch, " | ", length, " | | | | | ",
                         kSkippedTimeBudget, " |\n");
      continue;
    }
    const oracle::Inputs inputs = testing::MakeRandomInputs(
        options, std::vector<int>(grid.recurrent_batch, length), ++seed, /*random_initial_state=*/false);
    absl::Status status;
    double agree = 0;
    Timing prefill_t, chain_t;
    {
      // First runs from the zero state: compare the two paths' outputs.
      absl::StatusOr<testing::BackendOutputs> prefill_out =
          testing::RunOnBackend(backend, options, inputs, testing::EntryPoint::kPrefill);
      absl::StatusOr<std::unique_ptr<DecodeChain>> chain = DecodeChain::Create(backend, options, inputs);
      status = prefill_out.ok() ? chain.status() : prefill_out.status();
      if (status.ok()) status = (*chain)->RunAll();
      absl::StatusOr<testing::BackendOutputs> chain_out =
          status.ok() ? (*chain)->Fetch() : absl::StatusOr<testing::BackendOutputs>(status);
      status = chain_out.status();
      if (status.ok()) agree = MaxAbsRel(chain_out->o, prefill_out->o);
      // Timing: states keep evolving in place over repeats (same work).
      absl::StatusOr<std::unique_ptr<testing::StagedCall>> staged =
          status.ok() ? testing::StagedCall::Create(backend, options, inputs)
                      : absl::StatusOr<std::unique_ptr<testing::StagedCall>>(status);
      status = staged.status();
      if (status.ok()) {
        prefill_t = TimeRuns(timing_grid, [&] { return (*staged)->Run(testing::EntryPoint::kPrefill); });
        status = prefill_t.status;
      }
      if (status.ok()) {
        chain_t = TimeRuns(timing_grid, [&] { return (*chain)->RunAll(); });
        status = chain_t.status;
      }
    }
    row.Set("status", StatusJson(status));
    if (status.ok()) {
      const double p = Summarize(prefill_t.seconds).p50, c = Summarize(chain_t.seconds).p50;
      row.Set("prefill_time_s", SummaryJson(prefill_t.seconds))
          .Set("decode_loop_time_s", SummaryJson(chain_t.seconds))
          .Set("decode_loop_over_prefill", c / p)
          .Set("outputs_max_abs_rel", agree);
      md += absl::StrCat("| ", dim, " | bf16 | ", grid.recurrent_batch, " | ", length, " | ", Fixed(p * 1e3, 3),
                         " ms | ", Fixed(c * 1e3, 3), " ms | ", Fixed(c / p, 2), " | ", Sci(agree), " | ok |\n");
    } else {
      md += absl::StrCat("| ", dim, " | bf16 | ", grid.recurrent_batch, " | ", length, " | | | | | ",
                         Outcome(status), " |\n");
    }
    rows.Push(row);
  }
  out.Set("chunked_vs_recurrent", rows);
  md += "\n";
  return out;
}

}  // namespace gdn::eval
