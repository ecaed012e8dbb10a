#include "bench/eval/eval_stability.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/eval/decode_chain.h"
#include "bench/eval/eval_correctness.h"
#include "bench/eval/eval_stats.h"
#include "bench/eval/perf_stage.h"
#include "kernels/oracle/gdn_oracle.h"
#include "kernels/testing/error_stats.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn::eval {
namespace {

constexpr size_t kSampleBytes = 4u << 20;
// Memory left over after a run is freed: the cpu backend counts its own
// allocations exactly (0 expected); cuda reads cudaMemGetInfo, where the
// driver may keep a little.
double MemoryTolerance(const Backend& backend) {
  return backend.name() == "cpu" ? 0.0 : double(64u << 20);
}

Json RepeatedRuns(EvalContext& ctx, const LargestPrefill& largest, bool* pass) {
  const Grid& grid = *ctx.grid;
  Backend& backend = *ctx.backend;
  std::string& md = ctx.markdown;
  LargestPrefill cfg = largest;
  if (cfg.batch == 0) {
    cfg = {grid.perf_batches.back(), grid.perf_lengths.back(), grid.head_dims.back(), DType::kBF16, StateDType::kF32};
  }
  // >= 70% of the longest that fit: 3/4 of it, a multiple of 64 (at least 64).
  const int length = std::max(64, cfg.length * 3 / 4 / 64 * 64);
  const GdnOptions options = EvalOptions(grid.num_heads, cfg.head_dim, cfg.input, cfg.state);
  Json j = Json::Object();
  j.Set("batch", cfg.batch).Set("length", length).Set("longest_fitting_length", cfg.length)
      .Set("fraction_of_longest", double(length) / cfg.length).Set("head_dim", cfg.head_dim)
      .Set("input_dtype", std::string(DTypeName(cfg.input))).Set("state_dtype", std::string(StateDTypeName(cfg.state)))
      .Set("memory_tolerance_bytes", MemoryTolerance(backend));
  const double baseline = backend.MemoryInfo().used_bytes;
  std::vector<double> times, leftovers, diffs;
  std::vector<float> first_sample;
  int64_t nonfinite = 0;
  absl::Status status;
  int repeats = 0;
  for (int r = 0; r < grid.stability_repeats && ctx.TimeLeft(); ++r) {
    {
      // Same seed each repeat: identical inputs, so outputs must be identical.
      absl::StatusOr<std::unique_ptr<PerfStage>> stage =
          PerfStage::Create(backend, options, cfg.batch, length, true, ctx.flags->seed);
      if (!stage.ok()) {
        status = stage.status();
        break;
      }
      const Clock::time_point start = Clock::now();
      status = backend.Prefill(options, (*stage)->params());
      if (status.ok()) status = backend.Synchronize();
      times.push_back(SecondsSince(start));
      if (!status.ok()) break;
      absl::StatusOr<std::vector<float>> sample = (*stage)->OutputSample(kSampleBytes);
      if (!sample.ok()) {
        status = sample.status();
        break;
      }
      for (float v : *sample) nonfinite += !std::isfinite(v);
      if (r == 0) {
        first_sample = *sample;
        diffs.push_back(0);
      } else {
        double d = 0;
        for (size_t i = 0; i < sample->size(); ++i) d = std::max(d, double(std::fabs((*sample)[i] - first_sample[i])));
        diffs.push_back(d);
      }
    }
    leftovers.push_back(double(backend.MemoryInfo().used_bytes) - baseline);
    ++repeats;
  }
  double worst_leftover = 0, worst_diff = 0;
  for (double l : leftovers) worst_leftover = std::max(worst_leftover, std::fabs(l));
  for (double d : diffs) worst_diff = std::max(worst_diff, d);
  const bool memory_ok = worst_leftover <= MemoryTolerance(backend);
  const bool outputs_ok = worst_diff == 0 && nonfinite == 0;
  const double drift = DriftRatio(times);
  *pass = status.ok() && repeats >= 2 && memory_ok && outputs_ok;
  Json times_j = Json::Array(), left_j = Json::Array(), diff_j = Json::Array();
  for (double t : times) times_j.Push(t);
  for (double l : leftovers) left_j.Push(l);
  for (double d : diffs) diff_j.Push(d);
  j.Set("status", StatusJson(status)).Set("repeats", repeats).Set("time_s", times_j)
      .Set("memory_after_free_over_baseline_bytes", left_j).Set("output_max_abs_diff_vs_first", diff_j)
      .Set("output_sample_nonfinite", nonfinite).Set("time_drift_ratio_last_over_first_third", drift)
      .Set("memory_back_to_baseline", memory_ok).Set("outputs_identical", outputs_ok).Set("pass", *pass);
  md += "## Stability\n\n";
  md += absl::StrCat("Repeated runs: ", repeats, " x Prefill of B = ", cfg.batch, " x L = ", length, " (",
                     Fixed(100.0 * length / cfg.length, 0), "% of the longest length that ran, ", cfg.length,
                     "), D = ", cfg.head_dim, ", ", DTypeName(cfg.input), " in, ", StateDTypeName(cfg.state),
                     " state; each repeat stages, runs, reads 4 MiB of o and frees. Memory back to baseline: ",
                     memory_ok ? "yes" : "**no**", " (worst leftover ", worst_leftover, " bytes); outputs identical "
                     "across repeats: ", outputs_ok ? "yes" : "**no**", " (worst |diff| ", Sci(worst_diff),
                     ", NaN/Inf ", nonfinite, "); time drift (mean of last third / first third): ", Fixed(drift, 3),
                     " (reported, not judged: a shared machine's load moves it). ", status.ok() ? "" : std::string(status.message()),
                     "\n\n");
  return j;
}

Json DecodeChains(EvalContext& ctx, bool* pass) {
  const Grid& grid = *ctx.grid;
  Backend& backend = *ctx.backend;
  std::string& md = ctx.markdown;
  const int steps = grid.chain_checkpoints.back();
  const int dim = grid.head_dims.back();
  Json chains = Json::Array();
  md += absl::StrCat("Long decode chains: B = ", grid.chain_batch, ", Hqk = Hv = ", grid.chain_heads, ", D = ", dim,
                     ", bf16 in, ", steps, " Decode calls of one token from a zero state; error of that step's "
                     "outputs (all sequences and heads) against the float64 oracle, and of the bf16-state run "
                     "against the fp32-state run. Pass: below the bars of the correctness section (bf16 state: from its decay-memory "
                     "model) and no drift: past 8 decay memories the error may not grow beyond 2x its first settled value:\n\n");
  md += "| state | step | max_abs_rel vs oracle | rel_l2 vs oracle | max_abs_rel vs fp32 state | NaN/Inf | pass |\n";
  md += "| --- | --- | --- | --- | --- | --- | --- |\n";
  *pass = true;
  if (!ctx.TimeLeft()) {
    md += "| - | - | skipped (time budget) | | | | |\n\n";
    chains.Push(Json::Object().Set("status", Json::Object().Set("outcome", kSkippedTimeBudget)));
    *pass = false;
    return chains;
  }
  const GdnOptions base = EvalOptions(grid.chain_heads, dim, DType::kBF16, StateDType::kF32);
  // Zero initial state: the fp32 and bf16 state runs share inputs and oracle.
  const oracle::Inputs inputs = testing::MakeRandomInputs(
      base, std::vector<int>(grid.chain_batch, steps), ctx.flags->seed * 31337, /*random_initial_state=*/false);
  const oracle::Outputs ref = oracle::Run(base, inputs);
  const size_t row = size_t(grid.chain_heads) * dim;  // one token's outputs
  std::vector<float> fp32_o;
  for (StateDType state : {StateDType::kF32, StateDType::kBF16}) {
    GdnOptions options = base;
    options.state_dtype = state;
    const double memory = DecayMemorySteps(inputs);
    const Thresholds bars = ThresholdsFor(options.input_dtype, state, /*decode_chain=*/true, memory);
    Json c = Json::Object();
    c.Set("state_dtype", std::string(StateDTypeName(state))).Set("steps", steps).Set("batch", grid.chain_batch)
        .Set("heads", grid.chain_heads).Set("head_dim", dim).Set("decay_memory_steps", memory)
        .Set("threshold", Json::Object().Set("max_abs_rel", bars.output.max_abs_rel).Set("rel_l2", bars.output.rel_l2));
    absl::Status status;
    absl::StatusOr<std::unique_ptr<DecodeChain>> chain = DecodeChain::Create(backend, options, inputs);
    std::vector<double> step_times;
    absl::StatusOr<testing::BackendOutputs> got =
        chain.ok() ? absl::InternalError("not run") : chain.status();
    if (chain.ok()) {
      for (int t = 0; t < steps && status.ok(); ++t) {
        const Clock::time_point start = Clock::now();
        status = (*chain)->Step(t);
        if (status.ok()) status = backend.Synchronize();
        step_times.push_back(SecondsSince(start));
      }
      got = status.ok() ? (*chain)->Fetch() : absl::StatusOr<testing::BackendOutputs>(status);
    }
    c.Set("status", StatusJson(got.status()));
    if (!got.ok()) {
      *pass &= absl::IsResourceExhausted(got.status());
      md += absl::StrCat("| ", StateDTypeName(state), " | - | ", Outcome(got.status()), " | | | | |\n");
      chains.Push(c);
      continue;
    }
    Json points = Json::Array();
    bool chain_pass = true;
    // Drift: once a chain is past its decay memory (8 M steps) its error
    // must stop growing: rel_l2 at every later checkpoint <= 2x that at the
    // first such checkpoint (+ 10% of the bar, so fp32 noise is no failure).
    double settled_rel_l2 = -1;
    for (int checkpoint : grid.chain_checkpoints) {
      // Step `checkpoint` (1-based) of every sequence.
      std::vector<float> g;
      std::vector<double> r;
      std::vector<float> f32;
      for (int i = 0; i < grid.chain_batch; ++i) {
        const size_t at = (size_t(i) * steps + checkpoint - 1) * row;
        g.insert(g.end(), got->o.begin() + at, got->o.begin() + at + row);
        r.insert(r.end(), ref.o.begin() + at, ref.o.begin() + at + row);
        if (!fp32_o.empty()) f32.insert(f32.end(), fp32_o.begin() + at, fp32_o.begin() + at + row);
      }
      const testing::ErrorStats e = testing::Compare(g.data(), r.data(), r.size());
      double vs_fp32 = 0;
      if (!f32.empty()) {
        std::vector<double> f64(f32.begin(), f32.end());
        vs_fp32 = testing::Compare(g.data(), f64.data(), f64.size()).max_abs_rel;
      }
      bool ok = e.nonfinite == 0 && e.max_abs_rel <= bars.output.max_abs_rel && e.rel_l2 <= bars.output.rel_l2;
      if (checkpoint >= 8 * memory) {
        if (settled_rel_l2 < 0) settled_rel_l2 = e.rel_l2;
        ok &= e.rel_l2 <= 2 * settled_rel_l2 + 0.1 * bars.output.rel_l2;
      }
      chain_pass &= ok;
      Json pj = Json::Object().Set("step", checkpoint).Set("error_vs_oracle", ErrorJson(e)).Set("pass", ok);
      if (!f32.empty()) pj.Set("max_abs_rel_vs_fp32_state", vs_fp32);
      points.Push(pj);
      md += absl::StrCat("| ", StateDTypeName(state), " | ", checkpoint, " | ", Sci(e.max_abs_rel), " | ",
                         Sci(e.rel_l2), " | ", f32.empty() ? "-" : Sci(vs_fp32), " | ", e.nonfinite, " | ",
                         ok ? "yes" : "**NO**", " |\n");
    }
    // Final states too.
    std::vector<float> gs;
    std::vector<double> rs;
    for (int i = 0; i < grid.chain_batch; ++i) {
      gs.insert(gs.end(), got->final_states[i].begin(), got->final_states[i].end());
      rs.insert(rs.end(), ref.final_states[i].begin(), ref.final_states[i].end());
    }
    const testing::ErrorStats se = testing::Compare(gs.data(), rs.data(), rs.size());
    chain_pass &= se.nonfinite == 0 && se.max_abs_rel <= bars.state.max_abs_rel && se.rel_l2 <= bars.state.rel_l2;
    const size_t tenth = std::max<size_t>(1, step_times.size() / 10);
    const Summary first = Summarize({step_times.begin(), step_times.begin() + tenth});
    const Summary last = Summarize({step_times.end() - tenth, step_times.end()});
    c.Set("checkpoints", points).Set("final_state", ErrorJson(se)).Set("step_time_s", SummaryJson(step_times))
        .Set("step_time_p50_last_tenth_over_first_tenth", first.p50 > 0 ? last.p50 / first.p50 : 0.0)
        .Set("pass", chain_pass);
    md += absl::StrCat("| ", StateDTypeName(state), " | final state | ", Sci(se.max_abs_rel), " | ", Sci(se.rel_l2),
                       " | - | ", se.nonfinite, " | ", chain_pass ? "yes" : "**NO**", " |\n");
    *pass &= chain_pass;
    if (state == StateDType::kF32) fp32_o = got->o;
    chains.Push(c);
  }
  md += "\n";
  return chains;
}

}  // namespace

Json RunStability(EvalContext& ctx, const LargestPrefill& largest) {
  Json out = Json::Object();
  bool repeated_pass = false, chains_pass = false;
  out.Set("repeated", RepeatedRuns(ctx, largest, &repeated_pass));
  out.Set("decode_chains", DecodeChains(ctx, &chains_pass));
  out.Set("all_pass", repeated_pass && chains_pass);
  return out;
}

}  // namespace gdn::eval
