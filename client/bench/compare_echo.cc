#include "client/bench/compare_echo.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/bench/json_writer.h"
#include "client/bench/merge_results.h"
#include "client/bench/report.h"
#include "client/bench/server_metrics.h"
#include "client/gdn_client.h"

namespace gdn::client::bench {
namespace {

int CeilDiv(int a, int b) { return (a + b - 1) / b; }

BenchConfig TurnConfig(const BenchConfig& base, int turns, const std::string& server,
                       const std::string& label) {
  BenchConfig c = base;
  c.server = server;
  c.metrics.clear();
  c.label = label;
  c.duration_s = base.duration_s / turns;
  c.warmup_s = base.warmup_s / turns;
  if (base.rounds > 0) c.rounds = CeilDiv(base.rounds, turns);
  if (base.num_sessions > 0) c.num_sessions = CeilDiv(base.num_sessions, turns);
  return c;
}

// FailedPrecondition unless the echo answers with the server's shape.
absl::Status CheckEchoShape(const BenchConfig& c, const v1::LayerConfig& server,
                            const std::string& echo_address) {
  GdnClientOptions options;
  options.deadline = absl::Seconds(c.deadline_s);
  options.retry.max_attempts = 1;
  GdnClient echo(echo_address, options);
  absl::StatusOr<v1::ServerInfoResponse> info = echo.GetServerInfo();
  if (!info.ok()) {
    return absl::Status(info.status().code(), absl::StrCat("--compare_echo: GetServerInfo from ",
                                                           echo_address, ": ",
                                                           info.status().message()));
  }
  const v1::LayerConfig& e = info->config();
  if (e.num_qk_heads() != server.num_qk_heads() || e.num_v_heads() != server.num_v_heads() ||
      e.head_dim_k() != server.head_dim_k() || e.head_dim_v() != server.head_dim_v() ||
      e.activation_dtype() != server.activation_dtype() || e.num_layers() < c.layers) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--compare_echo %s reports Hqk %d Hv %d K %d V %d %s, %d layers; the server has Hqk %d "
        "Hv %d K %d V %d %s and the run uses %d layers: start the echo with the server's shape",
        echo_address, e.num_qk_heads(), e.num_v_heads(), e.head_dim_k(), e.head_dim_v(),
        v1::DType_Name(e.activation_dtype()), e.num_layers(), server.num_qk_heads(),
        server.num_v_heads(), server.head_dim_k(), server.head_dim_v(),
        v1::DType_Name(server.activation_dtype()), c.layers));
  }
  return absl::OkStatus();
}

// The latencies compared, by name.
std::vector<std::pair<std::string, const LatencyHistogram*>> Compared(const BenchStats& s) {
  return {{"prefill", &s.prefill().latency},
          {"decode", &s.decode().latency},
          {"decode_step", &s.decode_step},
          {"create", &s.of(CallType::kCreate).latency},
          {"close", &s.of(CallType::kClose).latency}};
}

double Ms(int64_t nanos) { return nanos / 1e6; }
double Ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / b : 0; }

}  // namespace

absl::StatusOr<CompareEchoResult> RunCompareEcho(const BenchConfig& config,
                                                 const std::string& echo_address, int turns) {
  if (turns < 1) return absl::InvalidArgumentError("--compare_rounds must be >= 1");
  if (!config.trace.empty()) {
    return absl::InvalidArgumentError("--compare_echo does not split a --trace_file into turns");
  }
  std::string metrics_before;
  if (!config.metrics.empty()) {
    absl::StatusOr<std::string> m = HttpGet(config.metrics, "/metrics");
    if (!m.ok()) return absl::UnavailableError(absl::StrCat("--metrics: ", m.status().message()));
    metrics_before = *m;
  }
  BenchConfig server_turn = TurnConfig(config, turns, config.server, "server");
  BenchConfig echo_turn = TurnConfig(config, turns, echo_address, "echo");
  std::vector<BenchResult> server_runs, echo_runs;
  for (int i = 0; i < 2 * turns; ++i) {
    // ABBA: S E E S S E ...
    const bool server_arm = (i % 4 == 0) || (i % 4 == 3);
    absl::StatusOr<BenchResult> r = RunBench(server_arm ? server_turn : echo_turn);
    if (!r.ok()) {
      return absl::Status(r.status().code(), absl::StrCat(server_arm ? "" : "--compare_echo: ",
                                                          r.status().message()));
    }
    if (server_arm && server_runs.empty()) {
      // The first server turn resolves the layers; every later turn uses them.
      server_turn.layers = echo_turn.layers = r->config.layers;
      if (absl::Status s = CheckEchoShape(echo_turn, r->server.config(), echo_address); !s.ok()) {
        return s;
      }
    }
    (server_arm ? server_runs : echo_runs).push_back(*std::move(r));
  }
  CompareEchoResult out;
  out.echo_address = echo_address;
  out.turns = turns;
  out.server = MergeTurns(server_runs, config.stability_pct);
  out.echo = MergeTurns(echo_runs, config.stability_pct);
  // The totals of the run as asked for, and its label.
  for (BenchResult* r : {&out.server, &out.echo}) {
    r->config.duration_s = config.duration_s;
    r->config.warmup_s = config.warmup_s;
    r->config.rounds = config.rounds;
    r->config.num_sessions = config.num_sessions;
    r->config.label = config.label;
  }
  out.server.config.metrics = config.metrics;
  if (!config.metrics.empty()) {
    absl::StatusOr<std::string> after = HttpGet(config.metrics, "/metrics");
    if (after.ok()) {
      out.server.have_server_metrics = true;
      out.server.server_metrics = DiffServerMetrics(metrics_before, *after);
    } else {
      out.server.client_bottleneck.push_back(
          absl::StrCat("(note) final /metrics scrape failed: ", after.status().message()));
    }
  }
  return out;
}

std::string FormatCompareEchoText(const CompareEchoResult& r) {
  std::string out = absl::StrFormat(
      "\n  compared with the echo %s (%s, %s): %d turns each, alternating (ABBA)\n"
      "  %-12s %9s %9s %10s %10s %7s %10s %10s %7s\n",
      r.echo_address, r.echo.server.device(), r.echo.server.version(), r.turns, "latency ms",
      "n server", "n echo", "server p50", "echo p50", "ratio", "server p99", "echo p99", "ratio");
  const auto server = Compared(r.server.measured);
  const auto echo = Compared(r.echo.measured);
  for (size_t i = 0; i < server.size(); ++i) {
    const LatencyHistogram& s = *server[i].second;
    const LatencyHistogram& e = *echo[i].second;
    if (s.count() == 0 && e.count() == 0) continue;
    out += absl::StrFormat("  %-12s %9d %9d %10.3f %10.3f %7.2f %10.3f %10.3f %7.2f\n",
                           server[i].first, s.count(), e.count(), Ms(s.Percentile(50)),
                           Ms(e.Percentile(50)), Ratio(s.Percentile(50), e.Percentile(50)),
                           Ms(s.Percentile(99)), Ms(e.Percentile(99)),
                           Ratio(s.Percentile(99), e.Percentile(99)));
  }
  return out;
}

std::string CompareEchoJson(const CompareEchoResult& r) {
  auto arm = [](const LatencyHistogram& h) {
    return JsonObject({{"count", absl::StrCat(h.count())},
                       {"mean_ms", JsonNumber(h.mean() / 1e6)},
                       {"p50_ms", JsonNumber(Ms(h.Percentile(50)))},
                       {"p99_ms", JsonNumber(Ms(h.Percentile(99)))}});
  };
  const auto server = Compared(r.server.measured);
  const auto echo = Compared(r.echo.measured);
  JsonFields calls;
  for (size_t i = 0; i < server.size(); ++i) {
    const LatencyHistogram& s = *server[i].second;
    const LatencyHistogram& e = *echo[i].second;
    if (s.count() == 0 && e.count() == 0) continue;
    calls.emplace_back(server[i].first,
                       JsonObject({{"server", arm(s)},
                                   {"echo", arm(e)},
                                   {"p50_ratio", JsonNumber(Ratio(s.Percentile(50), e.Percentile(50)))},
                                   {"p99_ratio", JsonNumber(Ratio(s.Percentile(99), e.Percentile(99)))}}));
  }
  return JsonObject({{"echo_server", JsonString(r.echo_address)},
                     {"echo_device", JsonString(r.echo.server.device())},
                     {"echo_version", JsonString(r.echo.server.version())},
                     {"turns", absl::StrCat(r.turns)},
                     {"order", JsonString("ABBA")},
                     {"calls", JsonObject(calls)},
                     {"echo_report", FormatJsonReport(r.echo)}});
}

}  // namespace gdn::client::bench
