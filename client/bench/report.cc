#include "client/bench/report.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/bench/json_writer.h"

namespace gdn::client::bench {
namespace {

double Ms(int64_t nanos) { return nanos / 1e6; }

constexpr double kPercentiles[] = {50, 90, 95, 99, 99.9};
constexpr const char* kPercentileNames[] = {"p50", "p90", "p95", "p99", "p99_9"};

std::string LatencyJson(const LatencyHistogram& h) {
  JsonFields f = {{"count", absl::StrCat(h.count())}, {"mean", JsonNumber(h.mean() / 1e6)}};
  for (int i = 0; i < 5; ++i) f.emplace_back(kPercentileNames[i], JsonNumber(Ms(h.Percentile(kPercentiles[i]))));
  f.emplace_back("max", JsonNumber(Ms(h.max())));
  return JsonObject(f);
}

std::string HistogramDeltaJson(const HistogramDelta& h, double scale) {
  return JsonObject({{"count", JsonNumber(h.count)},
                     {"mean", JsonNumber(h.mean() * scale)},
                     {"p50", JsonNumber(h.p50 * scale)},
                     {"p99", JsonNumber(h.p99 * scale)}});
}

template <typename Map, typename F>
std::string MapJson(const Map& m, F value) {
  JsonFields f;
  for (const auto& [k, v] : m) f.emplace_back(k, value(v));
  return JsonObject(f);
}

// Named latency histograms of a run, in report order.
std::vector<std::pair<std::string, const LatencyHistogram*>> Latencies(const BenchStats& s) {
  std::vector<std::pair<std::string, const LatencyHistogram*>> out;
  for (int i = 0; i < kNumCallTypes; ++i) {
    out.emplace_back(CallTypeName(static_cast<CallType>(i)), &s.by_type[i].latency);
  }
  out.emplace_back("ttfo", &s.ttfo);
  out.emplace_back("decode_step", &s.decode_step);
  return out;
}

// "tuned (window 64 MiB, frame 1 MiB, read 4 MiB)" or "gRPC defaults".
std::string TransportName(const wire::TransportOptions& t) {
  if (t.stream_window_bytes == 0 && t.max_frame_bytes == 0 && t.max_read_chunk_bytes == 0) {
    return "gRPC defaults";
  }
  return absl::StrFormat("window %d, frame %d, read chunk %d bytes (0: gRPC default)",
                         t.stream_window_bytes, t.max_frame_bytes, t.max_read_chunk_bytes);
}

std::string ModeName(const BenchConfig& c) { return c.mode == LoopMode::kClosed ? "closed" : "open"; }

// Client and server counts of each method over the whole run.
std::string AgreementJson(const BenchResult& r) {
  JsonFields f;
  for (const auto& [method, codes] : r.rpcs.by_method) {
    f.emplace_back(method, JsonObject({{"client", absl::StrCat(r.rpcs.Total(method))},
                                       {"server", JsonNumber(r.server_metrics.Requests(method))}}));
  }
  return JsonObject(f);
}

}  // namespace

Throughput ThroughputOf(const BenchResult& r) {
  Throughput t;
  if (r.measured_s <= 0) return t;
  const BenchStats& m = r.measured;
  const double layers = std::max(1, r.config.layers);
  t.forward_calls_per_s = m.forward_calls() / r.measured_s;
  t.token_layers_per_s = m.token_layers() / r.measured_s;
  t.tokens_per_s = t.token_layers_per_s / layers;
  t.prefill_tokens_per_s = m.prefill().token_layers / layers / r.measured_s;
  t.decode_tokens_per_s = m.decode().token_layers / layers / r.measured_s;
  t.sessions_per_s = m.sessions_completed / r.measured_s;
  return t;
}

bool IsPhaseName(const std::string& phase) {
  for (const auto& [name, h] : Latencies(BenchStats())) {
    if (name == phase) return true;
  }
  return false;
}

double PhaseP99Ms(const BenchResult& r, const std::string& phase) {
  for (const auto& [name, h] : Latencies(r.measured)) {
    if (name == phase) return Ms(h->Percentile(99));
  }
  return -1;
}

std::string FormatJsonReport(const BenchResult& r, const BenchResult* ceiling,
                             const JsonFields& extra) {
  const BenchConfig& c = r.config;
  const v1::LayerConfig& s = r.server.config();
  const Throughput t = ThroughputOf(r);
  JsonFields latency;
  for (const auto& [name, h] : Latencies(r.measured)) latency.emplace_back(name, LatencyJson(*h));
  JsonFields calls = {{"prefill", absl::StrCat(r.measured.prefill().calls)},
                      {"decode", absl::StrCat(r.measured.decode().calls)},
                      {"total", absl::StrCat(r.measured.forward_calls())},
                      {"failed", absl::StrCat(r.measured.failed_calls())},
                      {"create", absl::StrCat(r.measured.of(CallType::kCreate).calls)},
                      {"fork", absl::StrCat(r.measured.of(CallType::kFork).calls)},
                      {"close", absl::StrCat(r.measured.of(CallType::kClose).calls)}};
  JsonFields errors_by_type;
  for (int i = 0; i < kNumCallTypes; ++i) {
    errors_by_type.emplace_back(CallTypeName(static_cast<CallType>(i)),
                                absl::StrCat(r.measured.by_type[i].failed));
  }
  std::vector<std::string> windows;
  for (const WindowSummary& w : r.stability.windows) {
    windows.push_back(JsonObject({{"calls_per_s", JsonNumber(w.calls_per_s)}, {"p99_ms", JsonNumber(w.p99_ms)}}));
  }
  std::vector<std::string> bottleneck;
  for (const std::string& b : r.client_bottleneck) bottleneck.push_back(JsonString(b));
  JsonFields fields = {
      {"label", JsonString(c.label)},
      {"config", JsonObject({{"server", JsonString(c.server)},
                             {"mode", JsonString(ModeName(c))},
                             {"sessions", absl::StrCat(c.sessions)},
                             {"rate", JsonNumber(c.rate)},
                             {"arrival", JsonString(c.arrival)},
                             {"burstiness", JsonNumber(c.burstiness)},
                             {"num_sessions", absl::StrCat(c.num_sessions)},
                             {"client_threads", absl::StrCat(c.client_threads)},
                             {"prefill_tokens", JsonString(c.prefill_tokens.ToString())},
                             {"decode_steps", JsonString(c.decode_steps.ToString())},
                             {"trace_file", JsonString(c.trace_file)},
                             {"layers", absl::StrCat(c.layers)},
                             {"think_ms", JsonNumber(c.think_ms)},
                             {"shared_prefix_tokens", absl::StrCat(c.shared_prefix_tokens)},
                             {"fork_fanout", absl::StrCat(c.fork_fanout)},
                             {"sessions_per_call", absl::StrCat(c.sessions_per_call)},
                             {"draft_tokens", absl::StrCat(c.draft_tokens)},
                             {"acceptance_rate", JsonNumber(c.acceptance_rate)},
                             {"decode_tokens", absl::StrCat(c.decode_tokens)},
                             {"fork_at_checkpoint", absl::StrCat(c.fork_at_checkpoint)},
                             {"transport", JsonString(c.stream ? "stream" : "unary")},
                             {"part_bytes", absl::StrCat(c.part_bytes)},
                             {"connections", absl::StrCat(c.connections)},
                             {"connection_poll_us", absl::StrCat(c.connection_poll_us)},
                             {"grpc_transport", JsonString(TransportName(c.transport))},
                             {"channels", absl::StrCat(c.channels)},
                             {"warmup_s", JsonNumber(c.warmup_s)},
                             {"duration_s", JsonNumber(c.duration_s)},
                             {"rounds", absl::StrCat(c.rounds)},
                             {"seed", absl::StrCat(c.seed)}})},
      {"server", JsonObject({{"backend", JsonString(r.server.backend())},
                             {"device", JsonString(r.server.device())},
                             {"version", JsonString(r.server.version())},
                             {"num_layers", absl::StrCat(s.num_layers())},
                             {"num_qk_heads", absl::StrCat(s.num_qk_heads())},
                             {"num_v_heads", absl::StrCat(s.num_v_heads())},
                             {"head_dim_k", absl::StrCat(s.head_dim_k())},
                             {"head_dim_v", absl::StrCat(s.head_dim_v())},
                             {"activation_dtype", JsonString(v1::DType_Name(s.activation_dtype()))},
                             {"state_dtype", JsonString(s.state_dtype())},
                             {"gating_mode", JsonString(s.gating_mode())}})},
      {"workers", absl::StrCat(r.workers)},
      {"elapsed_s", JsonNumber(r.elapsed_s)},
      {"measured_s", JsonNumber(r.measured_s)},
      {"rounds_completed", absl::StrCat(r.measured.rounds_completed + r.warmup.rounds_completed)},
      {"sessions", JsonObject({{"started", absl::StrCat(r.measured.sessions_started)},
                               {"completed", absl::StrCat(r.measured.sessions_completed)}})},
      {"calls", JsonObject(calls)},
      {"throughput", JsonObject({{"calls_per_s", JsonNumber(t.forward_calls_per_s)},
                                 {"tokens_per_s", JsonNumber(t.tokens_per_s)},
                                 {"token_layers_per_s", JsonNumber(t.token_layers_per_s)},
                                 {"prefill_tokens_per_s", JsonNumber(t.prefill_tokens_per_s)},
                                 {"decode_tokens_per_s", JsonNumber(t.decode_tokens_per_s)},
                                 {"sessions_per_s", JsonNumber(t.sessions_per_s)}})},
      {"latency_ms", JsonObject(latency)},
      {"errors", MapJson(r.measured.errors, [](int64_t n) { return absl::StrCat(n); })},
      {"errors_by_type", JsonObject(errors_by_type)},
      {"retries", MapJson(r.retries, [](int64_t n) { return absl::StrCat(n); })},
      {"stability", JsonObject({{"checked", JsonBool(r.stability.checked)},
                                {"stable", JsonBool(r.stability.stable)},
                                {"max_throughput_change_pct", JsonNumber(r.stability.max_throughput_change_pct)},
                                {"max_p99_change_pct", JsonNumber(r.stability.max_p99_change_pct)},
                                {"verdict", JsonString(r.stability.ToString())},
                                {"windows", JsonArray(windows)}})},
      {"client", JsonObject({{"cpu_s", JsonNumber(r.client_load.cpu_s)},
                             {"cores", absl::StrCat(r.client_load.cores)},
                             {"cores_busy", JsonNumber(r.client_load.cores_busy())},
                             {"utilization", JsonNumber(r.client_load.utilization())},
                             {"schedule_lag_ms", LatencyJson(r.schedule_lag)},
                             {"late_starts", absl::StrCat(r.late_starts)},
                             {"bottleneck", JsonArray(bottleneck)}})},
      {"warmup", JsonObject({{"calls", absl::StrCat(r.warmup.forward_calls())},
                             {"failed", absl::StrCat(r.warmup.failed_calls())}})},
      {"rpcs", MapJson(r.rpcs.by_method, [](const std::map<std::string, int64_t>& codes) {
         return MapJson(codes, [](int64_t n) { return absl::StrCat(n); });
       })},
  };
  if (r.have_server_metrics) {
    const ServerMetricsDelta& m = r.server_metrics;
    auto hist = [](double scale) {
      return [scale](const HistogramDelta& h) { return HistogramDeltaJson(h, scale); };
    };
    fields.emplace_back(
        "server_metrics",
        JsonObject({{"requests", MapJson(m.requests, [](const std::map<std::string, double>& codes) {
                       return MapJson(codes, [](double n) { return JsonNumber(n); });
                     })},
                    {"queue_ms", MapJson(m.queue_s, hist(1e3))},
                    {"batch_size", MapJson(m.batch_size, hist(1))},
                    {"batch_tokens", MapJson(m.batch_tokens, hist(1))},
                    {"kernel_ms", MapJson(m.kernel_s, hist(1e3))},
                    {"staging_ms", MapJson(m.staging_s, hist(1e3))},
                    {"tokens", MapJson(m.tokens, [](double n) { return JsonNumber(n); })},
                    {"cache_bytes_after", MapJson(m.cache_bytes_after, [](double n) { return JsonNumber(n); })},
                    {"counters", MapJson(m.counters, [](double n) { return JsonNumber(n); })},
                    {"sessions_after", JsonNumber(m.sessions_after)}}));
    fields.emplace_back("agreement", AgreementJson(r));
  }
  if (ceiling != nullptr) {
    const Throughput tc = ThroughputOf(*ceiling);
    fields.emplace_back(
        "ceiling",
        JsonObject({{"server", JsonString(ceiling->config.server)},
                    {"device", JsonString(ceiling->server.device())},
                    {"calls_per_s", JsonNumber(tc.forward_calls_per_s)},
                    {"token_layers_per_s", JsonNumber(tc.token_layers_per_s)},
                    {"fraction_of_ceiling",
                     JsonNumber(tc.token_layers_per_s > 0 ? t.token_layers_per_s / tc.token_layers_per_s : 0)},
                    {"latency_ms", JsonObject({{"prefill", LatencyJson(ceiling->measured.prefill().latency)},
                                               {"decode", LatencyJson(ceiling->measured.decode().latency)}})}}));
  }
  fields.insert(fields.end(), extra.begin(), extra.end());
  return JsonObject(fields);
}

std::string FormatTextReport(const BenchResult& r, const BenchResult* ceiling) {
  const BenchConfig& c = r.config;
  const v1::LayerConfig& s = r.server.config();
  const Throughput t = ThroughputOf(r);
  std::string load = c.mode == LoopMode::kClosed
                         ? absl::StrFormat("closed loop, %d concurrent sessions", c.sessions)
                         : c.trace.empty()
                               ? absl::StrFormat("open loop, %.3g sessions/s %s%s", c.rate, c.arrival,
                                                 c.arrival == "gamma" ? absl::StrFormat(" (shape %.3g)", c.burstiness) : "")
                               : absl::StrFormat("open loop, trace %s x%.3g", c.trace_file, c.trace_speed);
  std::string out = absl::StrFormat(
      "gdn-bench%s: %s (%s, %s), Hqk %d Hv %d K %d V %d, %s activations, %s state\n"
      "  %s; %d per call, %s, %d threads, %d channels (%s), %d layers\n"
      "  prefill %s tokens, %s decode steps, think %.3g ms%s\n"
      "  measured %.2f s of %.2f s; %d sessions completed\n\n",
      c.label.empty() ? "" : " [" + c.label + "]", c.server, r.server.backend(), r.server.device(),
      s.num_qk_heads(), s.num_v_heads(), s.head_dim_k(), s.head_dim_v(),
      v1::DType_Name(s.activation_dtype()), s.state_dtype(), load, c.sessions_per_call,
      c.stream ? absl::StrCat("streaming (raw bytes",
                              c.part_bytes > 0 ? absl::StrFormat(", parts of <= %d bytes",
                                                                 c.part_bytes)
                                               : "",
                              c.connections > 1 ? absl::StrFormat(" over %d connections",
                                                                  c.connections)
                                                : "",
                              ")")
               : std::string("unary (raw bytes)"),
      r.workers, c.channels,
      TransportName(c.transport), c.layers,
      c.trace.empty() ? c.prefill_tokens.ToString() : "trace",
      c.trace.empty() ? c.decode_steps.ToString() : "trace", c.think_ms,
      c.fork_fanout > 0 ? absl::StrFormat(", shared prefix %d tokens x %d forks",
                                          c.shared_prefix_tokens, c.fork_fanout)
                        : "",
      r.measured_s, r.elapsed_s, r.measured.sessions_completed);
  if (c.draft_tokens > 0) {
    out += absl::StrFormat(
        "  speculative decode: drafts of %d tokens, acceptance rate %.3g; %d draft tokens, %d "
        "accepted (%.3g per step)\n\n",
        c.draft_tokens, c.acceptance_rate, r.draft_tokens, r.accepted_tokens,
        r.draft_tokens > 0 ? static_cast<double>(r.accepted_tokens) * c.draft_tokens /
                                 static_cast<double>(r.draft_tokens)
                           : 0.0);
  }
  if (c.fork_at_checkpoint > 0 && r.shared_prefills > 0) {
    // Each child skips prefilling the prefix up to its fork position; at the
    // parents' measured prefill rate over every layer, that much time to
    // first output is saved per session against prefilling it.
    const int64_t at = c.shared_prefix_tokens / c.fork_at_checkpoint * c.fork_at_checkpoint;
    const double saved = r.shared_prefill_ms * static_cast<double>(at) /
                         static_cast<double>(r.shared_prefill_tokens);
    out += absl::StrFormat(
        "  prefix reuse: %d parents prefilled %d tokens in %.3f ms (mean, every layer); "
        "children fork at %d: about %.3f ms of time to first output saved per session\n\n",
        r.shared_prefills, r.shared_prefill_tokens, r.shared_prefill_ms, at, saved);
  }
  out += absl::StrFormat("  %-12s %9s %6s %9s %9s %9s %9s %9s %9s %9s\n", "latency ms", "count",
                         "failed", "mean", "p50", "p90", "p95", "p99", "p99.9", "max");
  for (const auto& [name, h] : Latencies(r.measured)) {
    if (h->count() == 0 && name != "prefill" && name != "decode") continue;
    int64_t failed = 0;
    for (int i = 0; i < kNumCallTypes; ++i) {
      if (name == CallTypeName(static_cast<CallType>(i))) failed = r.measured.by_type[i].failed;
    }
    out += absl::StrFormat("  %-12s %9d %6d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", name,
                           h->count(), failed, h->mean() / 1e6, Ms(h->Percentile(50)),
                           Ms(h->Percentile(90)), Ms(h->Percentile(95)), Ms(h->Percentile(99)),
                           Ms(h->Percentile(99.9)), Ms(h->max()));
  }
  out += absl::StrFormat(
      "\n  throughput: %.1f Forward calls/s, %.1f tokens/s (prefill %.1f, decode %.1f), "
      "%.1f token-layers/s, %.2f sessions/s\n",
      t.forward_calls_per_s, t.tokens_per_s, t.prefill_tokens_per_s, t.decode_tokens_per_s,
      t.token_layers_per_s, t.sessions_per_s);
  std::vector<std::string> errs;
  for (const auto& [code, n] : r.measured.errors) errs.push_back(absl::StrCat(code, " ", n));
  out += absl::StrCat("  errors: ", errs.empty() ? "none" : absl::StrJoin(errs, ", "), "\n");
  std::vector<std::string> retried;
  for (const auto& [method, n] : r.retries) retried.push_back(absl::StrCat(method, " ", n));
  out += absl::StrCat("  retries (UNAVAILABLE, retried): ",
                      retried.empty() ? "none" : absl::StrJoin(retried, ", "), "\n");
  out += absl::StrCat("  stability: ", r.stability.ToString(), "\n");
  out += absl::StrFormat("  client: %.2f of %d cores busy (%.0f%%)", r.client_load.cores_busy(),
                         r.client_load.cores, 100 * r.client_load.utilization());
  if (c.mode == LoopMode::kOpen) {
    out += absl::StrFormat(", start lag p50 %.3f / p99 %.3f ms, %d starts > 1 ms late",
                           Ms(r.schedule_lag.Percentile(50)), Ms(r.schedule_lag.Percentile(99)),
                           r.late_starts);
  }
  out += "\n";
  for (const std::string& b : r.client_bottleneck) out += absl::StrCat("  CLIENT BOTTLENECK: ", b, "\n");
  if (r.have_server_metrics) {
    const ServerMetricsDelta& m = r.server_metrics;
    out += "\n  server (/metrics deltas over the whole run, warm-up included):\n";
    std::vector<std::string> agree;
    for (const auto& [method, codes] : r.rpcs.by_method) {
      agree.push_back(absl::StrFormat("%s %d/%.0f", method, r.rpcs.Total(method), m.Requests(method)));
    }
    out += absl::StrCat("    requests client/server: ", absl::StrJoin(agree, ", "), "\n");
    for (const auto& [method, h] : m.queue_s) {
      out += absl::StrFormat("    queue %-13s mean %.3f ms, p50 %.3f, p99 %.3f (%.0f calls)\n", method,
                             h.mean() * 1e3, h.p50 * 1e3, h.p99 * 1e3, h.count);
    }
    for (const std::string phase : {"decode", "prefill"}) {
      const HistogramDelta& b = m.batch_size.at(phase);
      if (b.count == 0) continue;
      out += absl::StrFormat(
          "    %-7s kernel calls %.0f: %.2f seqs, %.1f tokens per call, kernel mean %.3f ms p50 "
          "%.3f p99 %.3f",
          phase, b.count, b.mean(), m.batch_tokens.at(phase).mean(),
          m.kernel_s.at(phase).mean() * 1e3, m.kernel_s.at(phase).p50 * 1e3,
          m.kernel_s.at(phase).p99 * 1e3);
      const auto staging = m.staging_s.find(phase);
      if (staging != m.staging_s.end() && staging->second.count > 0) {
        out += absl::StrFormat(" (host staging p50 %.3f)", staging->second.p50 * 1e3);
      }
      out += "\n";
    }
    std::vector<std::string> cache;
    for (const auto& [k, v] : m.cache_bytes_after) cache.push_back(absl::StrFormat("%s %.0f", k, v));
    out += absl::StrCat("    cache bytes after: ", absl::StrJoin(cache, ", "), "\n");
    std::vector<std::string> counters;
    for (const auto& [k, v] : m.counters) counters.push_back(absl::StrFormat("%s %.0f", k, v));
    out += absl::StrCat("    cache events: ", absl::StrJoin(counters, ", "), "\n");
  }
  if (ceiling != nullptr) {
    const Throughput tc = ThroughputOf(*ceiling);
    out += absl::StrFormat(
        "\n  transport ceiling (%s, %s):\n    %.1f Forward calls/s, %.1f token-layers/s, decode p50 "
        "%.3f ms p99 %.3f ms\n    this run reaches %.1f%% of the ceiling's token-layers/s\n",
        ceiling->config.server, ceiling->server.device(), tc.forward_calls_per_s,
        tc.token_layers_per_s, Ms(ceiling->measured.decode().latency.Percentile(50)),
        Ms(ceiling->measured.decode().latency.Percentile(99)),
        tc.token_layers_per_s > 0 ? 100 * t.token_layers_per_s / tc.token_layers_per_s : 0.0);
  }
  return out;
}

std::string CsvHeader() {
  std::vector<std::string> cols = {"label", "mode", "sessions", "rate", "measured_s",
                                   "forward_calls_per_s", "tokens_per_s", "token_layers_per_s",
                                   "sessions_per_s", "errors", "stable", "client_utilization"};
  for (const auto& [name, h] : Latencies(BenchStats())) {
    for (const char* p : {"count", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p99_9_ms", "max_ms"}) {
      cols.push_back(absl::StrCat(name, "_", p));
    }
  }
  return absl::StrJoin(cols, ",") + "\n";
}

std::string CsvRow(const BenchResult& r) {
  const Throughput t = ThroughputOf(r);
  std::string label = r.config.label;
  std::replace(label.begin(), label.end(), ',', ';');
  std::vector<std::string> cells = {
      label, ModeName(r.config), absl::StrCat(r.config.sessions), JsonNumber(r.config.rate),
      JsonNumber(r.measured_s), JsonNumber(t.forward_calls_per_s), JsonNumber(t.tokens_per_s),
      JsonNumber(t.token_layers_per_s), JsonNumber(t.sessions_per_s),
      absl::StrCat(r.measured.failed_calls()),
      r.stability.checked ? (r.stability.stable ? "yes" : "no") : "unchecked",
      JsonNumber(r.client_load.utilization())};
  for (const auto& [name, h] : Latencies(r.measured)) {
    cells.push_back(absl::StrCat(h->count()));
    for (double p : kPercentiles) cells.push_back(JsonNumber(Ms(h->Percentile(p))));
    cells.push_back(JsonNumber(Ms(h->max())));
  }
  return absl::StrJoin(cells, ",") + "\n";
}

}  // namespace gdn::client::bench
