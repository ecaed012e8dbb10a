#include "bench/eval/eval_performance.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "bench/eval/ceilings.h"
#include "bench/eval/eval_stats.h"
#include "bench/eval/perf_stage.h"

namespace gdn::eval {
namespace {

constexpr size_t kSampleBytes = 4u << 20;  // o sample for NaN / Inf counts

struct Ceilings {
  double copy_bytes_per_s = 0;
  double flops_per_s = 0;  // 0: not measured
};

std::string Bytes(double b) {
  if (b >= 1e9) return absl::StrCat(Fixed(b / 1e9, 2), " GB");
  if (b >= 1e6) return absl::StrCat(Fixed(b / 1e6, 2), " MB");
  return absl::StrCat(Fixed(b / 1e3, 1), " kB");
}

std::string TimeCell(double s) {
  if (s >= 1) return absl::StrCat(Fixed(s, 3), " s");
  if (s >= 1e-3) return absl::StrCat(Fixed(s * 1e3, 3), " ms");
  return absl::StrCat(Fixed(s * 1e6, 1), " us");
}

std::string Pct(double part, double whole) {
  return whole > 0 ? Fixed(100 * part / whole, 1) : std::string("-");
}

// One timed configuration: stage, time, sample o, free; memory around it.
struct ConfigResult {
  Json json;
  bool ok = false;
  double p50 = 0;
  double peak_bytes = 0;  // backend memory over the baseline while staged
  std::string cells;      // Markdown: "outcome | mean | ... | peak mem |"
};

ConfigResult TimeConfig(EvalContext& ctx, const Ceilings& ceilings, const GdnOptions& options,
                        int batch, int length, bool decode, uint64_t seed) {
  Backend& backend = *ctx.backend;
  ConfigResult r;
  Json& j = r.json;
  j = Json::Object();
  j.Set("entry", decode ? "decode" : "prefill").Set("length", length).Set("batch", batch)
      .Set("head_dim", options.shape.head_dim_k)
      .Set("input_dtype", std::string(DTypeName(options.input_dtype)))
      .Set("state_dtype", std::string(StateDTypeName(options.state_dtype)));
  const std::string blank = " | | | | | | | | | | |";
  if (!ctx.TimeLeft()) {
    j.Set("status", Json::Object().Set("outcome", kSkippedTimeBudget));
    r.cells = absl::StrCat(kSkippedTimeBudget, blank);
    return r;
  }
  if (absl::Status st = backend.Supports(options); !st.ok()) {
    j.Set("status", StatusJson(st));
    r.cells = Outcome(st) + blank;
    return r;
  }
  const double baseline = backend.MemoryInfo().used_bytes;
  double peak = baseline;
  absl::Status status;
  Timing timing;
  int64_t sample_nonfinite = 0, sample_values = 0;
  {
    // Decode: one token per sequence, state read and written in place.
    absl::StatusOr<std::unique_ptr<PerfStage>> stage =
        PerfStage::Create(backend, options, batch, decode ? 1 : length, !decode, seed);
    if (!stage.ok()) {
      status = stage.status();
    } else {
      peak = std::max(peak, double(backend.MemoryInfo().used_bytes));
      const GdnParams& p = (*stage)->params();
      timing = TimeRuns(*ctx.grid, [&]() -> absl::Status {
        absl::Status st = decode ? backend.Decode(options, p) : backend.Prefill(options, p);
        absl::Status sync = backend.Synchronize();
        return st.ok() ? sync : st;
      });
      status = timing.status;
      peak = std::max(peak, double(backend.MemoryInfo().used_bytes));
      if (status.ok()) {
        absl::StatusOr<std::vector<float>> sample = (*stage)->OutputSample(kSampleBytes);
        if (!sample.ok()) {
          status = sample.status();
        } else {
          sample_values = sample->size();
          for (float v : *sample) sample_nonfinite += !std::isfinite(v);
        }
      }
    }
  }
  const double after = backend.MemoryInfo().used_bytes;
  j.Set("status", StatusJson(status));
  j.Set("memory", Json::Object().Set("baseline_bytes", baseline).Set("peak_bytes", peak)
                      .Set("peak_over_baseline_bytes", peak - baseline)
                      .Set("after_free_over_baseline_bytes", after - baseline));
  r.peak_bytes = peak - baseline;
  if (!status.ok()) {
    r.cells = Outcome(status) + blank;
    return r;
  }
  const Summary s = Summarize(timing.seconds);
  const int tokens_per_seq = decode ? 1 : length;
  const double tokens = double(batch) * tokens_per_seq;
  const double bytes = PerfStage::CallBytes(options, batch, tokens_per_seq, decode);
  const double flops = PerfStage::CallFlops(options, batch, tokens_per_seq);
  j.Set("warmup_runs", timing.warmup).Set("time_s", SummaryJson(timing.seconds));
  j.Set("tokens_per_s", tokens / s.mean);
  j.Set("bytes_per_call", bytes).Set("bytes_per_s", bytes / s.p50);
  j.Set("flops_per_call", flops).Set("flops_per_s", flops / s.p50);
  j.Set("pct_of_copy_bw", ceilings.copy_bytes_per_s > 0 ? 100 * bytes / s.p50 / ceilings.copy_bytes_per_s : Json());
  j.Set("pct_of_fma_peak", ceilings.flops_per_s > 0 ? 100 * flops / s.p50 / ceilings.flops_per_s : Json());
  j.Set("output_sample", Json::Object().Set("values", sample_values).Set("nonfinite", sample_nonfinite));
  r.ok = true;
  r.p50 = s.p50;
  r.cells = absl::StrCat(sample_nonfinite > 0 ? "**NaN/Inf in o**" : "ok", " | ", TimeCell(s.mean), " | ",
                         TimeCell(s.p50), " | ", TimeCell(s.p95), " | ", TimeCell(s.p99), " | ", s.n, " | ",
                         Sci(tokens / s.mean), " | ", Fixed(bytes / s.p50 / 1e9, 2), " | ",
                         Pct(bytes / s.p50, ceilings.copy_bytes_per_s), " | ", Fixed(flops / s.p50 / 1e9, 2), " | ",
                         Pct(flops / s.p50, ceilings.flops_per_s), " | ", Bytes(peak - baseline), " |");
  return r;
}

}  // namespace

Timing TimeRuns(const Grid& grid, const std::function<absl::Status()>& call) {
  Timing t;
  for (int i = 0; i < grid.warmup_runs; ++i) {
    t.status = call();
    if (!t.status.ok()) return t;
    ++t.warmup;
  }
  double spent = 0;
  while (static_cast<int>(t.seconds.size()) < grid.max_runs &&
         (static_cast<int>(t.seconds.size()) < grid.min_runs || spent < grid.seconds_per_config)) {
    const Clock::time_point start = Clock::now();
    t.status = call();
    const double s = SecondsSince(start);
    if (!t.status.ok()) return t;
    t.seconds.push_back(s);
    spent += s;
  }
  return t;
}

Json SummaryJson(const std::vector<double>& seconds) {
  const Summary s = Summarize(seconds);
  return Json::Object().Set("n", s.n).Set("mean", s.mean).Set("stddev", s.stddev).Set("min", s.min)
      .Set("p50", s.p50).Set("p95", s.p95).Set("p99", s.p99).Set("max", s.max);
}

Json RunPerformance(EvalContext& ctx, LargestPrefill* largest) {
  const Grid& grid = *ctx.grid;
  Backend& backend = *ctx.backend;
  std::string& md = ctx.markdown;
  uint64_t seed = ctx.flags->seed * 7919;
  Json out = Json::Object();
  out.Set("method", "host steady_clock around (call + Synchronize) per run, after warm-up runs; inputs staged once "
                    "outside the timed region; on cuda each time includes the launch overhead. tokens_per_s = "
                    "tokens / mean time; bytes_per_s and flops_per_s use the P50 time; bytes = activations + gating "
                    "+ state pages (read + write); flops = 7 K V per token per head (the recurrence's useful work)");

  // Ceilings, measured now.
  Ceilings ceilings;
  Json cj = Json::Object();
  absl::StatusOr<CopyCeiling> copy = MeasureCopyCeiling(backend, grid.copy_bytes, 5);
  if (copy.ok()) {
    ceilings.copy_bytes_per_s = copy->bytes_per_s;
    cj.Set("copy", Json::Object().Set("bytes", copy->bytes).Set("runs", copy->runs)
                       .Set("seconds_p50", copy->seconds_p50).Set("bytes_per_s", copy->bytes_per_s)
                       .Set("how", std::string(backend.name()) == "cpu"
                                       ? "CopyOnDevice = memmove of host memory, read + write bytes"
                                       : "CopyOnDevice = device-to-device copy, read + write bytes"));
  } else {
    cj.Set("copy", Json::Object().Set("status", StatusJson(copy.status())));
  }
  if (backend.name() == "cpu") {
    const FmaCeiling fma = MeasureCpuFmaCeiling(ctx.flags->cpu_threads, grid.name == "ci" ? 0.3 : 1.0);
    ceilings.flops_per_s = fma.flops_per_s;
    cj.Set("fma", Json::Object().Set("flops_per_s", fma.flops_per_s).Set("threads", fma.threads)
                      .Set("loop", fma.avx2_fma ? "avx2+fma, 8 accumulators x 8 lanes" : "sse, 8 x 4 lanes"));
  } else {
    cj.Set("fma", Json::Object().Set("flops_per_s", Json())
                      .Set("note", "not measured by gdn-eval; see bench/results decode/prefill (GDN.md: H200 bf16 GEMM 684 TFLOP/s)"));
  }
  out.Set("ceilings", cj);
  md += "## Performance\n\n";
  md += "Time per call: host clock around (call + Synchronize) after warm-up, inputs staged outside the timed "
        "region (on cuda this includes launch overhead). Bytes = activations + gating + state pages; FLOPs = the "
        "recurrence's 7 K V per token per head.\n\n";
  md += absl::StrCat("Ceilings measured in this run: copy ",
                     copy.ok() ? absl::StrCat(Fixed(copy->bytes_per_s / 1e9, 1), " GB/s (", Bytes(copy->bytes), " CopyOnDevice, read + write)")
                               : std::string(copy.status().message()),
                     "; FMA ", ceilings.flops_per_s > 0 ? absl::StrCat(Fixed(ceilings.flops_per_s / 1e9, 1), " GFLOP/s (fp32 FMA loop, all threads)")
                                                       : "not measured by gdn-eval (see bench/results decode/prefill)",
                     ".\n\n");

  // Decode and the same-total-tokens comparison are cheap and what a server
  // lives on: they run first, so a time budget that ends inside the long
  // prefill sweep still leaves them measured. The report keeps the prefill
  // tables first.
  std::string later_md;
  // Decode: B sequences x 1 token per call, state pages read and written in
  // place. The cost per step does not depend on how long the context is (the
  // state has a fixed size), so decode is swept over batch only.
  later_md += "### Decode (one call = one token for each of B sequences, state in place)\n\n";
  later_md += "| D | in | state | B | outcome | mean | P50 | P95 | P99 | runs | tokens/s | GB/s | % copy | GFLOP/s | % FMA | peak mem |\n";
  later_md += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  Json decode = Json::Array();
  for (int dim : grid.head_dims) {
    for (DType input : grid.input_dtypes) {
      for (StateDType state : grid.state_dtypes) {
        const GdnOptions options = EvalOptions(grid.num_heads, dim, input, state);
        for (int batch : grid.decode_batches) {
          ConfigResult r = TimeConfig(ctx, ceilings, options, batch, 1, true, ++seed);
          later_md += absl::StrCat("| ", dim, " | ", DTypeName(input), " | ", StateDTypeName(state), " | ", batch, " | ",
                             r.cells, "\n");
          decode.Push(r.json);
        }
      }
    }
  }
  out.Set("decode", decode);

  // The same total tokens as few long or many short sequences.
  later_md += absl::StrCat("\n### Same total tokens (", grid.same_total_tokens,
                     "), few long vs many short sequences (prefill, D = ", grid.head_dims.back(),
                     ", bf16 in, fp32 state)\n\n");
  later_md += "| B | L | outcome | mean | P50 | P95 | P99 | runs | tokens/s | GB/s | % copy | GFLOP/s | % FMA | peak mem |\n";
  later_md += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  Json same = Json::Array();
  const GdnOptions same_options = EvalOptions(grid.num_heads, grid.head_dims.back(), DType::kBF16, StateDType::kF32);
  for (int batch : grid.same_total_batches) {
    const int length = static_cast<int>(grid.same_total_tokens / batch);
    ConfigResult r = TimeConfig(ctx, ceilings, same_options, batch, length, false, ++seed);
    later_md += absl::StrCat("| ", batch, " | ", length, " | ", r.cells, "\n");
    same.Push(r.json);
  }
  out.Set("same_total_tokens", same);

  // Prefill: lengths x batches x head dims x input dtypes, fp32 state; and
  // the bf16 state for the largest head dim in bf16.
  struct Series { int dim; DType input; StateDType state; };
  std::vector<Series> series;
  for (int dim : grid.head_dims) {
    for (DType input : grid.input_dtypes) series.push_back({dim, input, StateDType::kF32});
  }
  series.push_back({grid.head_dims.back(), DType::kBF16, StateDType::kBF16});
  // Measured in the order a server needs them (bf16 inputs, the widest head
  // dim, fp32 then bf16 state; fp32 inputs, the recurrent kernel on the GPU,
  // last), so a budget that runs out cuts the least used configurations.
  std::stable_sort(series.begin(), series.end(), [](const Series& a, const Series& b) {
    return std::make_tuple(a.input != DType::kBF16, -a.dim, a.state != StateDType::kF32) <
           std::make_tuple(b.input != DType::kBF16, -b.dim, b.state != StateDType::kF32);
  });
  md += "### Prefill (one call, B sequences of L tokens, zero initial state)\n\n";
  md += "| D | in | state | B | L | outcome | mean | P50 | P95 | P99 | runs | tokens/s | GB/s | % copy | GFLOP/s | % FMA | peak mem |\n";
  md += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  Json prefill = Json::Array(), scaling = Json::Array(), growth = Json::Array();
  std::string scaling_md;
  double largest_bytes = 0;
  for (const Series& sr : series) {
    const GdnOptions options = EvalOptions(grid.num_heads, sr.dim, sr.input, sr.state);
    for (int batch : grid.perf_batches) {
      std::vector<int64_t> ok_lengths;
      std::vector<double> ok_times, ok_len_d, ok_peaks;
      for (int length : grid.perf_lengths) {
        ConfigResult r = TimeConfig(ctx, ceilings, options, batch, length, false, ++seed);
        const std::string id = absl::StrCat("| ", sr.dim, " | ", DTypeName(sr.input), " | ", StateDTypeName(sr.state),
                                            " | ", batch, " | ", length, " | ");
        if (r.ok) {
          ok_lengths.push_back(length);
          ok_times.push_back(r.p50);
          ok_len_d.push_back(length);
          ok_peaks.push_back(r.peak_bytes);
          const double call_bytes = PerfStage::CallBytes(options, batch, length, false);
          if (call_bytes > largest_bytes) {
            largest_bytes = call_bytes;
            *largest = {batch, length, sr.dim, sr.input, sr.state};
          }
        }
        md += id + r.cells + "\n";
        prefill.Push(r.json);
      }
      Json steps = Json::Array();
      std::string step_text;
      for (const ScalingStep& st : ScalingSteps(ok_lengths, ok_times)) {
        step_text += absl::StrCat(step_text.empty() ? "" : ", ", st.from_length, "->", st.to_length, ": ",
                                  Fixed(st.efficiency, 2));
        steps.Push(Json::Object().Set("from_length", st.from_length).Set("to_length", st.to_length)
                       .Set("length_ratio", st.length_ratio).Set("time_ratio", st.time_ratio)
                       .Set("efficiency", st.efficiency));
      }
      scaling.Push(Json::Object().Set("head_dim", sr.dim).Set("input_dtype", std::string(DTypeName(sr.input)))
                       .Set("state_dtype", std::string(StateDTypeName(sr.state))).Set("batch", batch)
                       .Set("steps", steps));
      scaling_md += absl::StrCat("| ", sr.dim, " | ", DTypeName(sr.input), " | ", StateDTypeName(sr.state), " | ",
                                 batch, " | ", step_text.empty() ? "-" : step_text, " | ",
                                 Fixed(Slope(ok_len_d, ok_peaks), 0), " |\n");
      growth.Push(Json::Object().Set("head_dim", sr.dim).Set("input_dtype", std::string(DTypeName(sr.input)))
                      .Set("state_dtype", std::string(StateDTypeName(sr.state))).Set("batch", batch)
                      .Set("lengths", [&] { Json a = Json::Array(); for (double l : ok_len_d) a.Push(l); return a; }())
                      .Set("peak_over_baseline_bytes", [&] { Json a = Json::Array(); for (double b : ok_peaks) a.Push(b); return a; }())
                      .Set("bytes_per_token_slope", Slope(ok_len_d, ok_peaks)));
    }
  }
  out.Set("prefill", prefill).Set("scaling", scaling).Set("memory_growth", growth);
  md += "\n`% copy` above 100 means the working set stayed in the caches (the copy probe is larger than them).\n\n";
  md += "Scaling: P50 time ratio when the length grows, efficiency = time ratio / length ratio (1 linear, < 1 "
        "fixed costs amortised, > 1 super-linear). Memory growth: least-squares bytes per token of peak backend "
        "memory over the lengths.\n\n| D | in | state | B | efficiency per length step | memory bytes/token |\n"
        "| --- | --- | --- | --- | --- | --- |\n";
  md += scaling_md;
  md += later_md;  // decode and same-total-tokens tables, measured first

  md += "\n";
  return out;
}

}  // namespace gdn::eval
