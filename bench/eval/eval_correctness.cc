#include "bench/eval/eval_correctness.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/eval/decode_chain.h"
#include "kernels/dtype_convert.h"
#include "kernels/oracle/gdn_oracle.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn::eval {
namespace {

using testing::BackendOutputs;
using testing::Compare;
using testing::EntryPoint;
using testing::ErrorStats;
using testing::GateProfile;

// Errors of one backend run against the oracle, over all outputs and over
// all final states (concatenated).
struct RunErrors {
  ErrorStats output, state;
};

RunErrors Errors(const BackendOutputs& got, const oracle::Outputs& ref) {
  RunErrors e;
  e.output = Compare(got.o.data(), ref.o.data(), ref.o.size());
  std::vector<float> got_states;
  std::vector<double> ref_states;
  for (size_t i = 0; i < ref.final_states.size(); ++i) {
    got_states.insert(got_states.end(), got.final_states[i].begin(), got.final_states[i].end());
    ref_states.insert(ref_states.end(), ref.final_states[i].begin(), ref.final_states[i].end());
  }
  e.state = Compare(got_states.data(), ref_states.data(), ref_states.size());
  return e;
}

bool Within(const ErrorStats& e, const Bar& bar) {
  return e.nonfinite == 0 && e.max_abs_rel <= bar.max_abs_rel && e.rel_l2 <= bar.rel_l2;
}

Json BarJson(const Bar& bar) {
  return Json::Object().Set("max_abs_rel", bar.max_abs_rel).Set("rel_l2", bar.rel_l2);
}

// Runs `inputs` through the backend as one Prefill call or as a decode chain.
absl::StatusOr<BackendOutputs> RunEntry(Backend& backend, const GdnOptions& options,
                                        const oracle::Inputs& inputs, bool decode) {
  if (!decode) return testing::RunOnBackend(backend, options, inputs, EntryPoint::kPrefill);
  absl::StatusOr<std::unique_ptr<DecodeChain>> chain =
      DecodeChain::Create(backend, options, inputs);
  if (!chain.ok()) return chain.status();
  if (absl::Status st = (*chain)->RunAll(); !st.ok()) return st;
  return (*chain)->Fetch();
}

// One checked run as a report row: status, errors, pass. `cells` gets the
// Markdown cells "out max | out l2 | state max | state l2 | NaN/Inf | pass |".
Json CheckRow(Backend& backend, const GdnOptions& options, const oracle::Inputs& inputs,
              const oracle::Outputs& ref, bool decode, bool* pass, std::string* cells) {
  Json row = Json::Object();
  row.Set("entry", decode ? "decode" : "prefill");
  const Thresholds bars =
      ThresholdsFor(options.input_dtype, options.state_dtype, decode, DecayMemorySteps(inputs));
  row.Set("threshold_output", BarJson(bars.output)).Set("threshold_state", BarJson(bars.state));
  absl::Status support = backend.Supports(options);
  absl::StatusOr<BackendOutputs> got =
      support.ok() ? RunEntry(backend, options, inputs, decode) : support;
  row.Set("status", StatusJson(got.status()));
  if (!got.ok()) {
    // A resource limit is recorded, not failed; anything else fails.
    *pass = absl::IsResourceExhausted(got.status());
    row.Set("pass", *pass);
    *cells = absl::StrCat(" ", Outcome(got.status()), " | | | | | ", *pass ? "yes" : "**NO**", " |");
    return row;
  }
  const RunErrors e = Errors(*got, ref);
  *pass = Within(e.output, bars.output) && Within(e.state, bars.state);
  row.Set("output", ErrorJson(e.output)).Set("state", ErrorJson(e.state)).Set("pass", *pass);
  *cells = absl::StrCat(" ", Sci(e.output.max_abs_rel), " | ", Sci(e.output.rel_l2), " | ",
                        Sci(e.state.max_abs_rel), " | ", Sci(e.state.rel_l2), " | ",
                        e.output.nonfinite + e.state.nonfinite, " | ", *pass ? "yes" : "**NO**", " |");
  return row;
}

// Extreme-input transforms of a random input (in place, then re-rounded to
// the wire dtype so the oracle sees what the kernel sees).
void AllEqualTokens(const GdnOptions& o, oracle::Inputs* in) {
  const LayerShape& s = o.shape;
  const size_t qk = size_t(s.num_qk_heads) * s.head_dim_k, v = size_t(s.num_v_heads) * s.head_dim_v;
  const size_t gate = s.num_v_heads;
  for (int i = 0; i < in->num_seqs(); ++i) {
    const size_t first = in->cu_seqlens[i];
    for (size_t t = first + 1; t < size_t(in->cu_seqlens[i + 1]); ++t) {
      std::copy_n(&in->q[first * qk], qk, &in->q[t * qk]);
      std::copy_n(&in->k[first * qk], qk, &in->k[t * qk]);
      std::copy_n(&in->v[first * v], v, &in->v[t * v]);
      std::copy_n(&in->g[first * gate], gate, &in->g[t * gate]);
      std::copy_n(&in->beta[first * gate], gate, &in->beta[t * gate]);
    }
  }
}

void ScaleActivations(const GdnOptions& o, float factor, oracle::Inputs* in) {
  for (auto* x : {&in->q, &in->k, &in->v}) {
    for (float& e : *x) e *= factor;
    RoundThrough(o.input_dtype, x->data(), x->size());
  }
  for (auto& state : in->initial_states) {
    for (float& e : state) e *= factor;
    testing::RoundThroughState(o, &state);
  }
}

// Half of the (token, head) pairs masked out: g = 0 and beta = 0, i.e. the
// token leaves that head's state untouched (padding / gating masks).
void RandomGatingMask(uint64_t seed, oracle::Inputs* in) {
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < in->g.size(); ++i) {
    if (rng() & 1) {
      in->g[i] = 0.0f;
      in->beta[i] = 0.0f;
    }
  }
}

struct ExtremeCase {
  std::string name;
  GateProfile profile = GateProfile::kRandom;
  int length = 0, batch = 2, heads = 0;
  void (*transform)(const GdnOptions&, uint64_t, oracle::Inputs*) = nullptr;
};

}  // namespace

Thresholds ThresholdsFor(DType input, StateDType state, bool decode_chain, double memory_steps) {
  const bool bf16 = input != DType::kF32 || state != StateDType::kF32;
  const double one = bf16 ? 5e-3 : 1e-3;
  Thresholds t;
  t.output = t.state = Bar{one, one};
  if (decode_chain && state == StateDType::kBF16) {
    constexpr double kUnitRoundoff = 1.0 / 512;  // bf16: 8 significant bits, round to nearest
    const double m = std::max(1.0, memory_steps);
    t.output = t.state = Bar{std::max(one, kUnitRoundoff * m), std::max(one, kUnitRoundoff * std::sqrt(m))};
  }
  return t;
}

double DecayMemorySteps(const oracle::Inputs& inputs) {
  double sum = 0;
  size_t count = 0;
  if (!inputs.g.empty()) {
    for (float g : inputs.g) sum += g;
    count = inputs.g.size();
  } else if (!inputs.a.empty() && !inputs.A_log.empty()) {
    const size_t hv = inputs.A_log.size();
    for (size_t i = 0; i < inputs.a.size(); ++i) {
      sum += oracle::FusedDecay(inputs.a[i], inputs.A_log[i % hv], inputs.dt_bias[i % hv]);
    }
    count = inputs.a.size();
  }
  int longest = 1;
  for (int i = 0; i < inputs.num_seqs(); ++i) {
    longest = std::max(longest, inputs.cu_seqlens[i + 1] - inputs.cu_seqlens[i]);
  }
  const double mean_g = count > 0 ? sum / double(count) : 0.0;
  const double decay = std::exp(mean_g);  // per-step survival of an error
  return decay < 1.0 ? std::min(double(longest), 1.0 / (1.0 - decay)) : double(longest);
}

Json RunCorrectness(EvalContext& ctx) {
  const Grid& grid = *ctx.grid;
  Backend& backend = *ctx.backend;
  uint64_t seed = ctx.flags->seed * 1000003;
  Json out = Json::Object();
  out.Set("thresholds", Json::Object()
                            .Set("fp32", ThresholdsFor(DType::kF32, StateDType::kF32, false).output.rel_l2)
                            .Set("any_bf16", ThresholdsFor(DType::kBF16, StateDType::kF32, false).output.rel_l2)
                            .Set("bf16_state_decode_chain", "max_abs_rel <= 2^-9 * M, rel_l2 <= 2^-9 * sqrt(M), M = 1 / (1 - exp(mean g)) capped at the length; per row in threshold_output")
                            .Set("measures", "max_abs_rel = max|got-ref|/max|ref|, rel_l2 = ||got-ref||/||ref||; both must be below the bar, outputs and final states, no NaN/Inf"));
  int checked = 0, passed = 0, resource_limited = 0, skipped = 0;
  bool all_pass = true;
  std::string& md = ctx.markdown;
  md += "## Correctness against the float64 oracle\n\n";
  md += absl::StrCat("Random inputs (GDN.md: q, k randn with in-kernel L2 norm, v randn, g = logsigmoid(randn)/16, "
                     "beta = sigmoid(randn), random initial states), Hqk = Hv = ", grid.num_heads,
                     ". Bars: 1e-3 (fp32), 5e-3 (any bf16); a bf16 state rounded after every decode step (u = 2^-9) keeps each rounding for about "
                     "M = 1 / (1 - exp(mean g)) steps (~20 here), so its decode rows allow max_abs_rel <= u M (aligned roundings) "
                     "and rel_l2 <= u sqrt(M) (independent ones), at least 5e-3: derived from that model, not fitted to results. Bars apply on both "
                     "measures, for outputs and final states. Configs with more than ", grid.oracle_token_heads,
                     " token-heads are checked on a prefix of at most 2 sequences (column `checked`).\n\n");
  md += "| L | B | D | in | state | entry | checked | out max_abs_rel | out rel_l2 | state max_abs_rel | state rel_l2 | NaN/Inf | pass |\n";
  md += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";

  auto tally = [&](const Json& row, bool pass, const std::string& cells) {
    ++checked;
    if (cells.find("resource_limit") != std::string::npos) ++resource_limited;
    if (pass) ++passed;
    all_pass &= pass;
    (void)row;
  };


  // The long single-head lengths and the extreme inputs are cheap and the
  // grid is not: they run first, so a time budget that ends inside the
  // grid still leaves them checked. The report keeps the grid table first.
  std::string grid_md, tail_md;
  // Long lengths in full on one head.
  tail_md += "\nLong lengths checked in full on one head (B = 1, Hqk = Hv = 1, D = 128, bf16 in, fp32 state):\n\n";
  tail_md += "| L | entry | out max_abs_rel | out rel_l2 | state max_abs_rel | state rel_l2 | NaN/Inf | pass |\n";
  tail_md += "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
  Json single = Json::Array();
  for (int length : grid.single_head_lengths) {
    const GdnOptions options = EvalOptions(1, 128, DType::kBF16, StateDType::kF32);
    if (!ctx.TimeLeft()) {
      single.Push(Json::Object().Set("length", length)
                      .Set("status", Json::Object().Set("outcome", kSkippedTimeBudget)));
      ++skipped;
      tail_md += absl::StrCat("| ", length, " | - | skipped (time budget) | | | | | |\n");
      continue;
    }
    const oracle::Inputs inputs = testing::MakeRandomInputs(options, {length}, ++seed, true);
    const oracle::Outputs ref = oracle::Run(options, inputs);
    for (bool decode : {false, true}) {
      bool pass = false;
      std::string cells;
      Json row = CheckRow(backend, options, inputs, ref, decode, &pass, &cells);
      tail_md += absl::StrCat("| ", length, " | ", decode ? "decode" : "prefill", " |", cells, "\n");
      row.Set("length", length).Set("batch", 1).Set("heads", 1).Set("head_dim", 128)
          .Set("input_dtype", "bf16").Set("state_dtype", "fp32");
      tally(row, pass, cells);
      single.Push(row);
    }
  }
  out.Set("single_head", single);

  // Extreme inputs, each through Prefill and a decode chain, fp32 and bf16
  // activations, fp32 state, D = 128.
  auto no_transform = [](const GdnOptions&, uint64_t, oracle::Inputs*) {};
  std::vector<ExtremeCase> cases = {
      {"all_equal_tokens", GateProfile::kRandom, grid.extreme_length, 2, grid.num_heads,
       [](const GdnOptions& o, uint64_t, oracle::Inputs* in) { AllEqualTokens(o, in); }},
      {"large_values_1e6", GateProfile::kRandom, grid.extreme_length, 2, grid.num_heads,
       [](const GdnOptions& o, uint64_t, oracle::Inputs* in) { ScaleActivations(o, 1e6f, in); }},
      {"small_values_1e-6", GateProfile::kRandom, grid.extreme_length, 2, grid.num_heads,
       [](const GdnOptions& o, uint64_t, oracle::Inputs* in) { ScaleActivations(o, 1e-6f, in); }},
      {"beta_zero", GateProfile::kBetaZero, grid.extreme_length, 2, grid.num_heads, no_transform},
      {"beta_one", GateProfile::kBetaOne, grid.extreme_length, 2, grid.num_heads, no_transform},
      {"strong_decay", GateProfile::kStrongDecay, grid.extreme_length, 2, grid.num_heads, no_transform},
      {"random_gating_mask", GateProfile::kRandom, grid.extreme_length, 2, grid.num_heads,
       [](const GdnOptions&, uint64_t s, oracle::Inputs* in) { RandomGatingMask(s, in); }},
      {absl::StrCat("no_decay_", grid.no_decay_steps, "_steps"), GateProfile::kNoDecay,
       grid.no_decay_steps, 1, 1, no_transform},
  };
  tail_md += "\nExtreme inputs (D = 128, fp32 state; NaN/Inf counts outputs and final states):\n\n";
  tail_md += "| case | L | B | H | in | entry | out max_abs_rel | out rel_l2 | state max_abs_rel | state rel_l2 | NaN/Inf | pass |\n";
  tail_md += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  Json extreme = Json::Array();
  for (const ExtremeCase& c : cases) {
    for (DType input : {DType::kF32, DType::kBF16}) {
      const GdnOptions options = EvalOptions(c.heads, 128, input, StateDType::kF32);
      if (!ctx.TimeLeft()) {
        extreme.Push(Json::Object().Set("case", c.name).Set("input_dtype", std::string(DTypeName(input)))
                         .Set("status", Json::Object().Set("outcome", kSkippedTimeBudget)));
        ++skipped;
        tail_md += absl::StrCat("| ", c.name, " | ", c.length, " | ", c.batch, " | ", c.heads, " | ",
                           DTypeName(input), " | - | skipped (time budget) | | | | | |\n");
        continue;
      }
      oracle::Inputs inputs = testing::MakeRandomInputs(
          options, std::vector<int>(c.batch, c.length), ++seed, true, c.profile);
      c.transform(options, seed, &inputs);
      const oracle::Outputs ref = oracle::Run(options, inputs);
      for (bool decode : {false, true}) {
        bool pass = false;
        std::string cells;
        Json row = CheckRow(backend, options, inputs, ref, decode, &pass, &cells);
        tail_md += absl::StrCat("| ", c.name, " | ", c.length, " | ", c.batch, " | ", c.heads, " | ",
                           DTypeName(input), " | ", decode ? "decode" : "prefill", " |", cells, "\n");
        row.Set("case", c.name).Set("length", c.length).Set("batch", c.batch).Set("heads", c.heads)
            .Set("head_dim", 128).Set("input_dtype", std::string(DTypeName(input))).Set("state_dtype", "fp32");
        tally(row, pass, cells);
        extreme.Push(row);
      }
    }
  }
  out.Set("extreme", extreme);

  Json rows = Json::Array();
  for (int length : grid.check_lengths) {
    for (int batch : grid.check_batches) {
      for (int dim : grid.head_dims) {
        for (DType input : grid.input_dtypes) {
          for (StateDType state : grid.state_dtypes) {
            const GdnOptions options = EvalOptions(grid.num_heads, dim, input, state);
            // The subsample rule (see Grid::oracle_token_heads).
            int seqs = batch, tokens = length;
            std::string mode = "full";
            if (int64_t{batch} * length * grid.num_heads > grid.oracle_token_heads) {
              seqs = std::min(batch, 2);
              tokens = static_cast<int>(std::min<int64_t>(
                  length, std::max<int64_t>(64, grid.oracle_token_heads / (seqs * grid.num_heads) / 64 * 64)));
              mode = "prefix";
            }
            const std::string checked_text = mode == "full" ? "full"
                : absl::StrCat(seqs, " seq x ", tokens, " tok");
            if (!ctx.TimeLeft()) {
              for (const char* entry : {"prefill", "decode"}) {
                rows.Push(Json::Object().Set("length", length).Set("batch", batch).Set("head_dim", dim)
                              .Set("input_dtype", std::string(DTypeName(input)))
                              .Set("state_dtype", std::string(StateDTypeName(state)))
                              .Set("entry", entry).Set("status", Json::Object().Set("outcome", kSkippedTimeBudget)));
                ++skipped;
                grid_md += absl::StrCat("| ", length, " | ", batch, " | ", dim, " | ", DTypeName(input), " | ",
                                   StateDTypeName(state), " | ", entry, " | - | skipped (time budget) | | | | | |\n");
              }
              continue;
            }
            const oracle::Inputs inputs = testing::MakeRandomInputs(
                options, std::vector<int>(seqs, tokens), ++seed, /*random_initial_state=*/true);
            const oracle::Outputs ref = oracle::Run(options, inputs);
            for (bool decode : {false, true}) {
              bool pass = false;
              std::string cells;
              Json row = CheckRow(backend, options, inputs, ref, decode, &pass, &cells);
              grid_md += absl::StrCat("| ", length, " | ", batch, " | ", dim, " | ", DTypeName(input), " | ",
                                 StateDTypeName(state), " | ", decode ? "decode" : "prefill", " | ",
                                 checked_text, " |", cells, "\n");
              row.Set("length", length).Set("batch", batch).Set("head_dim", dim)
                  .Set("input_dtype", std::string(DTypeName(input)))
                  .Set("state_dtype", std::string(StateDTypeName(state)))
                  .Set("checked", Json::Object().Set("mode", mode).Set("sequences", seqs)
                                       .Set("tokens_per_sequence", tokens).Set("heads", grid.num_heads));
              tally(row, pass, cells);
              rows.Push(row);
            }
          }
        }
      }
    }
  }
  out.Set("grid", rows);
  md += grid_md + tail_md;
  out.Set("counts", Json::Object().Set("checked", checked).Set("passed", passed)
                        .Set("resource_limited", resource_limited).Set("skipped_time_budget", skipped));
  out.Set("all_pass", all_pass && skipped == 0);
  md += absl::StrCat("\nChecked ", checked, " runs: ", passed, " passed, ", resource_limited,
                     " stopped at a resource limit (recorded, not failed), ", skipped,
                     " skipped for the time budget. All pass: ", all_pass && skipped == 0 ? "yes" : "**no**", ".\n\n");
  return out;
}

}  // namespace gdn::eval
