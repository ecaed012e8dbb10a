#include "client/bench/sweep.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/bench/json_writer.h"
#include "client/bench/report.h"

namespace gdn::client::bench {
namespace {

absl::StatusOr<LoadKind> ParseKind(const std::string& name, const std::string& flag) {
  if (name == "concurrency") return LoadKind::kConcurrency;
  if (name == "rate") return LoadKind::kRate;
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": load must be 'concurrency' or 'rate', got '", name, "'"));
}

absl::StatusOr<double> ParseLoad(const std::string& text, LoadKind kind, const std::string& flag) {
  double x;
  if (!absl::SimpleAtod(text, &x) || !(x > 0) || !std::isfinite(x) ||
      (kind == LoadKind::kConcurrency && x != std::floor(x))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": '", text, "' is not a ",
        kind == LoadKind::kConcurrency ? "positive integer" : "positive number"));
  }
  return x;
}

// A percentile in ms, or "-" when nothing was recorded in the measured
// window (e.g. no session reached its first output before the run ended):
// 0.000 would read as a measurement.
std::string MsOrDash(const LatencyHistogram& h, double percentile) {
  if (h.count() == 0) return "-";
  return absl::StrFormat("%.3f", h.Percentile(percentile) / 1e6);
}

}  // namespace

const char* LoadKindName(LoadKind kind) {
  return kind == LoadKind::kConcurrency ? "concurrency" : "rate";
}

absl::StatusOr<SweepSpec> ParseSweep(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits(':', 1));
  if (parts.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sweep='", text, "': expected concurrency:1,2,4 or rate:5,10,20"));
  }
  SweepSpec s;
  absl::StatusOr<LoadKind> kind = ParseKind(parts[0], "sweep");
  if (!kind.ok()) return kind.status();
  s.kind = *kind;
  for (const std::string& v : std::vector<std::string>(absl::StrSplit(parts[1], ','))) {
    absl::StatusOr<double> load = ParseLoad(v, s.kind, "sweep");
    if (!load.ok()) return load.status();
    s.loads.push_back(*load);
  }
  return s;
}

absl::StatusOr<LoadRange> ParseLoadRange(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slo_load='", text, "': expected concurrency:MIN:MAX or rate:MIN:MAX"));
  }
  LoadRange r;
  absl::StatusOr<LoadKind> kind = ParseKind(parts[0], "slo_load");
  if (!kind.ok()) return kind.status();
  r.kind = *kind;
  absl::StatusOr<double> lo = ParseLoad(parts[1], r.kind, "slo_load");
  if (!lo.ok()) return lo.status();
  absl::StatusOr<double> hi = ParseLoad(parts[2], r.kind, "slo_load");
  if (!hi.ok()) return hi.status();
  if (*hi < *lo) return absl::InvalidArgumentError("--slo_load: MAX < MIN");
  r.min = *lo;
  r.max = *hi;
  return r;
}

BenchConfig AtLoad(const BenchConfig& base, LoadKind kind, double load) {
  BenchConfig c = base;
  if (kind == LoadKind::kConcurrency) {
    c.mode = LoopMode::kClosed;
    const int unit = UnitSessions(c);
    c.sessions = std::max(unit, static_cast<int>(std::ceil(load / unit)) * unit);
    c.label = absl::StrCat("concurrency=", c.sessions);
  } else {
    c.mode = LoopMode::kOpen;
    c.rate = load;
    c.label = absl::StrFormat("rate=%g", load);
  }
  return c;
}

absl::StatusOr<SweepResult> RunSweep(const BenchConfig& base, const SweepSpec& spec) {
  SweepResult s;
  s.kind = spec.kind;
  for (double load : spec.loads) {
    absl::StatusOr<BenchResult> r = RunBench(AtLoad(base, spec.kind, load));
    if (!r.ok()) return r.status();
    s.loads.push_back(load);
    s.points.push_back(std::move(*r));
  }
  return s;
}

absl::StatusOr<SweepResult> RunSloSearch(const BenchConfig& base, const LoadRange& range,
                                         double slo_p99_ms, const std::string& phase,
                                         int max_probes) {
  SweepResult s;
  s.kind = range.kind;
  s.slo = true;
  s.slo_p99_ms = slo_p99_ms;
  s.slo_phase = phase;
  SloSearchOptions o;
  o.min_load = range.min;
  o.max_load = range.max;
  o.integer_load = range.kind == LoadKind::kConcurrency;
  o.resolution = o.integer_load ? std::max(1, UnitSessions(base)) : std::max(1e-3, 0.05 * range.min);
  o.max_probes = max_probes;
  absl::StatusOr<SloSearchResult> search =
      SearchSlo(o, slo_p99_ms, [&](double load) -> absl::StatusOr<double> {
        absl::StatusOr<BenchResult> r = RunBench(AtLoad(base, range.kind, load));
        if (!r.ok()) return r.status();
        s.loads.push_back(load);
        s.points.push_back(std::move(*r));
        const BenchResult& p = s.points.back();
        // A point with failed calls does not meet the objective.
        if (p.measured.failed_calls() > 0) return slo_p99_ms * 2 + 1;
        return PhaseP99Ms(p, phase);
      });
  if (!search.ok()) return search.status();
  s.search = std::move(*search);
  return s;
}

std::string FormatSweepText(const SweepResult& s) {
  std::string out = absl::StrFormat("\nsweep over %s:\n", LoadKindName(s.kind));
  out += absl::StrFormat("  %-16s %10s %10s %12s %10s %10s %10s %10s %7s %s\n", "load", "calls/s",
                         "tokens/s", "tok-layer/s", "ttfo p99", "dec p50", "dec p99", "step p99",
                         "errors", "stability");
  for (size_t i = 0; i < s.points.size(); ++i) {
    const BenchResult& r = s.points[i];
    const Throughput t = ThroughputOf(r);
    const auto& d = r.measured.decode().latency;
    out += absl::StrFormat("  %-16s %10.1f %10.1f %12.1f %10s %10s %10s %10s %7d %s%s\n",
                           r.config.label, t.forward_calls_per_s, t.tokens_per_s,
                           t.token_layers_per_s, MsOrDash(r.measured.ttfo, 99),
                           MsOrDash(d, 50), MsOrDash(d, 99),
                           MsOrDash(r.measured.decode_step, 99), r.measured.failed_calls(),
                           r.stability.checked ? (r.stability.stable ? "stable" : "UNSTABLE") : "-",
                           r.client_bottleneck.empty() ? "" : " CLIENT-BOUND");
  }
  if (s.slo) {
    if (s.search.best_probe >= 0) {
      const BenchResult& best = s.points[s.search.best_probe];
      const Throughput t = ThroughputOf(best);
      out += absl::StrFormat(
          "\n  SLO %s P99 <= %.3g ms: highest load meeting it %s = %g (P99 %.3f ms)%s\n"
          "  goodput there: %.2f sessions/s, %.1f tokens/s, %.1f token-layers/s\n",
          s.slo_phase, s.slo_p99_ms, LoadKindName(s.kind), s.search.best_load,
          s.search.probes[s.search.best_probe].p99_ms,
          s.search.converged ? "" : " (not converged: raise --slo_max_probes)", t.sessions_per_s,
          t.tokens_per_s, t.token_layers_per_s);
    } else {
      out += absl::StrFormat("\n  SLO %s P99 <= %.3g ms: not met even at the lowest load\n",
                             s.slo_phase, s.slo_p99_ms);
    }
  }
  return out;
}

std::string FormatSweepJson(const SweepResult& s) {
  std::vector<std::string> points;
  for (size_t i = 0; i < s.points.size(); ++i) {
    points.push_back(JsonObject({{"load", JsonNumber(s.loads[i])},
                                 {"report", FormatJsonReport(s.points[i])}}));
  }
  JsonFields f = {{"sweep", JsonObject({{"kind", JsonString(LoadKindName(s.kind))},
                                        {"points", JsonArray(points)}})}};
  if (s.slo) {
    std::vector<std::string> probes;
    for (const SloProbe& p : s.search.probes) {
      probes.push_back(JsonObject({{"load", JsonNumber(p.load)},
                                   {"p99_ms", JsonNumber(p.p99_ms)},
                                   {"meets", JsonBool(p.meets)}}));
    }
    JsonFields slo = {{"phase", JsonString(s.slo_phase)},
                      {"p99_ms", JsonNumber(s.slo_p99_ms)},
                      {"best_load", JsonNumber(s.search.best_load)},
                      {"converged", JsonBool(s.search.converged)},
                      {"probes", JsonArray(probes)}};
    if (s.search.best_probe >= 0) {
      const Throughput t = ThroughputOf(s.points[s.search.best_probe]);
      slo.emplace_back("goodput", JsonObject({{"sessions_per_s", JsonNumber(t.sessions_per_s)},
                                              {"tokens_per_s", JsonNumber(t.tokens_per_s)},
                                              {"token_layers_per_s", JsonNumber(t.token_layers_per_s)}}));
    }
    f.emplace_back("slo", JsonObject(slo));
  }
  return JsonObject(f) + "\n";
}

std::string FormatSweepCsv(const SweepResult& s) {
  std::string out = CsvHeader();
  for (const BenchResult& r : s.points) out += CsvRow(r);
  return out;
}

}  // namespace gdn::client::bench
