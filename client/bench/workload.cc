// RunBench: connects, runs the closed- or open-loop driver with a progress
// line, and gathers the result (windows, stability, client load, server
// metrics).
#include "client/bench/workload.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "client/bench/arrival.h"
#include "client/bench/session_runner.h"
#include "client/grpc_status.h"
#include "kernels/gdn_types.h"

namespace gdn::client::bench {
namespace {

Clock::duration Dur(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Everything the drivers share.
struct RunContext {
  const BenchConfig* config;
  std::vector<std::unique_ptr<GdnClient>>* clients;
  v1::LayerConfig layer_config;
  Recorder* recorder;
  Clock::time_point start, stop_at;  // stop_at: far future for counted runs
  bool counted;                      // rounds / num_sessions / trace decide the end
};

int PoolRows(const BenchConfig& c) {
  const int prefill = std::max({c.prefill_tokens.UpperBound(), c.shared_prefix_tokens, 1});
  return std::min(8192, prefill * c.sessions_per_call + 1);
}

void RunClosedLoop(const RunContext& ctx, int workers) {
  const BenchConfig& c = *ctx.config;
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&ctx, &c, w] {
      std::mt19937_64 rng(c.seed * 1000003 + w);
      GdnClient* client = (*ctx.clients)[w % ctx.clients->size()].get();
      const RequestFactory factory(ctx.layer_config, PoolRows(c), rng);
      SessionRunner runner(client, &factory, c, ctx.recorder, ctx.stop_at, rng());
      for (int round = 0;; ++round) {
        if (c.rounds > 0 ? round >= c.rounds : Clock::now() >= ctx.stop_at) break;
        const bool ok = runner.RunUnit(MakeUnitPlan(c, rng), Clock::now());
        if (!ok && Clock::now() < ctx.stop_at) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

// Open loop: the dispatcher (this thread) releases units at their arrival
// times into a queue that `threads` client threads drain.
void RunOpenLoop(const RunContext& ctx, int threads_n, std::vector<std::string>* notes) {
  const BenchConfig& c = *ctx.config;
  struct Arrival {
    Clock::time_point at;
    UnitPlan plan;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Arrival> queue;
  bool done = false;
  std::atomic<int> idle{0};
  int64_t waited_for_thread = 0;

  std::vector<std::thread> threads;
  for (int w = 0; w < threads_n; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(c.seed * 1000003 + w);
      GdnClient* client = (*ctx.clients)[w % ctx.clients->size()].get();
      const RequestFactory factory(ctx.layer_config, PoolRows(c), rng);
      SessionRunner runner(client, &factory, c, ctx.recorder, ctx.stop_at, rng());
      while (true) {
        Arrival a;
        {
          std::unique_lock<std::mutex> lock(mu);
          ++idle;
          cv.wait(lock, [&] { return done || !queue.empty(); });
          --idle;
          if (queue.empty()) return;
          a = std::move(queue.front());
          queue.pop_front();
        }
        const Clock::time_point started = Clock::now();
        ctx.recorder->RecordScheduleLag(a.at, started);
        runner.RunUnit(a.plan, a.at);
      }
    });
  }

  std::mt19937_64 rng(c.seed * 7919 + 17);
  const int unit = UnitSessions(c);
  absl::StatusOr<ArrivalProcess> process =
      ArrivalProcess::Make(c.arrival, std::max(1e-9, c.rate / unit), c.burstiness);
  Clock::time_point next = ctx.start;
  int64_t units = 0;
  const int64_t max_units = !c.trace.empty() ? static_cast<int64_t>(c.trace.size())
                            : c.num_sessions > 0 ? (c.num_sessions + unit - 1) / unit
                                                 : INT64_MAX;
  while (units < max_units) {
    Arrival a;
    if (!c.trace.empty()) {
      a.at = ctx.start + Dur(c.trace[units].arrival_s / c.trace_speed);
      a.plan = MakeUnitPlan(c, rng, &c.trace[units]);
    } else {
      next += Dur(process->NextGap(rng));
      a.at = next;
      a.plan = MakeUnitPlan(c, rng);
    }
    if (a.at >= ctx.stop_at) break;
    std::this_thread::sleep_until(a.at);
    std::lock_guard<std::mutex> lock(mu);
    if (idle.load() <= static_cast<int>(queue.size())) ++waited_for_thread;
    queue.push_back(std::move(a));
    cv.notify_one();
    ++units;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  for (std::thread& t : threads) t.join();
  if (waited_for_thread > 0) {
    notes->push_back(absl::StrCat(waited_for_thread, " of ", units,
                                  " arrivals found every client thread busy "
                                  "(raise --client_threads)"));
  }
}

void PrintProgress(const ProgressSnapshot& p, const BenchConfig& c, CallType key) {
  std::fprintf(stderr,
               "[%6.1fs]%s %8.1f calls/s  %s p99 %8.3f ms  sessions %lld  errors %lld%s\n",
               p.elapsed_s, c.label.empty() ? "" : (" " + c.label).c_str(),
               p.seconds_since_last > 0 ? p.calls_since_last / p.seconds_since_last : 0.0,
               CallTypeName(key), p.key_p99_ns / 1e6, static_cast<long long>(p.sessions_started),
               static_cast<long long>(p.errors),
               p.behind_schedule > 0
                   ? absl::StrCat("  behind schedule ", p.behind_schedule).c_str()
                   : "");
}

}  // namespace

int UnitSessions(const BenchConfig& c) {
  return c.fork_fanout > 0 ? c.fork_fanout : c.sessions_per_call;
}

absl::Status ValidateConfig(const BenchConfig& c) {
  auto bad = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (c.server.empty()) return bad("--server is empty");
  if (c.sessions_per_call < 1) return bad("--sessions_per_call must be >= 1");
  if (c.part_bytes < 0) return bad("--part_bytes must be >= 0, got ", c.part_bytes);
  if (c.part_bytes > 0 && !c.stream) {
    return bad("--part_bytes pipelines the parts of a call over a stream: it needs "
               "--transport=stream (unary parts would go one after another)");
  }
  if (c.connections < 1 || c.connections > 64) {
    return bad("--connections must be in [1, 64], got ", c.connections);
  }
  if (c.connections > 1 && !c.stream) {
    return bad("--connections spreads the parts of a call over streams on several "
               "connections: it needs --transport=stream");
  }
  if (c.fork_fanout < 0 || c.shared_prefix_tokens < 0) {
    return bad("--fork_fanout and --shared_prefix_tokens must be >= 0");
  }
  if (c.fork_at_checkpoint != 0 &&
      (c.fork_fanout == 0 || c.fork_at_checkpoint < 0 || c.fork_at_checkpoint % 64 != 0 ||
       c.shared_prefix_tokens < c.fork_at_checkpoint)) {
    return bad("--fork_at_checkpoint=N needs --fork_fanout, N a positive multiple of 64 and "
               "--shared_prefix_tokens >= N");
  }
  if (c.warm_prefix && (c.fork_fanout == 0 || c.shared_prefix_tokens == 0)) {
    return bad("--warm_prefix needs --fork_fanout and --shared_prefix_tokens");
  }
  if (c.shared_prefix_tokens > 0 && c.fork_fanout == 0) {
    return bad("--shared_prefix_tokens needs --fork_fanout=N (sessions forked from the prefix)");
  }
  const int unit = UnitSessions(c);
  if (c.mode == LoopMode::kClosed) {
    if (c.sessions < 1) return bad("--sessions must be >= 1");
    if (c.sessions % unit != 0) {
      return bad("--sessions (", c.sessions, ") must be a multiple of ",
                 c.fork_fanout > 0 ? "--fork_fanout (" : "--sessions_per_call (", unit, ")");
    }
    if (!c.trace.empty()) return bad("--trace_file replays arrivals: it needs --mode=open");
  } else {
    if (c.trace.empty() && !(c.rate > 0)) return bad("--mode=open needs --rate > 0 (sessions/s)");
    if (c.client_threads < 1) return bad("--client_threads must be >= 1");
    if (!c.trace.empty() && (unit != 1)) {
      return bad("--trace_file needs --sessions_per_call=1 and no --fork_fanout");
    }
    if (!(c.trace_speed > 0)) return bad("--trace_speed must be > 0");
    if (c.num_sessions < 0) return bad("--num_sessions must be >= 0");
    if (c.rounds != 0) return bad("--rounds is for --mode=closed; use --num_sessions");
    absl::StatusOr<ArrivalProcess> p =
        ArrivalProcess::Make(c.arrival, c.trace.empty() ? c.rate : 1, c.burstiness);
    if (!p.ok()) return p.status();
  }
  if (c.prefill_tokens.UpperBound() == 0 && c.decode_steps.UpperBound() == 0 && c.trace.empty()) {
    return bad("nothing to run: --prefill_tokens and --decode_steps are 0");
  }
  if (c.layers < 0) return bad("--layers must be >= 0 (0: all)");
  if (c.channels < 0) return bad("--channels must be >= 0 (0: auto)");
  if (c.rounds < 0) return bad("--rounds must be >= 0");
  if (c.warmup_s < 0) return bad("--warmup_s must be >= 0");
  if (c.think_ms < 0) return bad("--think_ms must be >= 0");
  if (c.draft_tokens != 0 && (c.draft_tokens < 2 || c.draft_tokens > kMaxDecodeTokens)) {
    return bad(absl::StrCat("--draft_tokens must be 0 (off) or 2..", kMaxDecodeTokens));
  }
  if (!(c.acceptance_rate >= 0 && c.acceptance_rate <= 1)) {
    return bad("--acceptance_rate must be in [0, 1]");
  }
  if (c.decode_tokens < 1 || c.decode_tokens > kMaxDecodeTokens) {
    return bad(absl::StrCat("--decode_tokens must be in 1..", kMaxDecodeTokens));
  }
  if (c.decode_tokens != 1 && c.draft_tokens > 0) {
    return bad("--decode_tokens is for plain decode; a draft step has --draft_tokens tokens");
  }
  if (c.window_s < 0) return bad("--window_s must be >= 0");
  if (!(c.stability_pct > 0)) return bad("--stability_pct must be > 0");
  const bool counted = c.rounds > 0 || c.num_sessions > 0 || !c.trace.empty();
  if (!counted && !(c.duration_s > 0)) {
    return bad("--duration_s must be > 0 (or give --rounds / --num_sessions / --trace_file)");
  }
  if (!(c.deadline_s > 0)) return bad("--deadline_s must be > 0");
  if (!(c.retry_s >= 0)) return bad("--retry_s must be >= 0");
  return absl::OkStatus();
}

absl::StatusOr<BenchResult> RunBench(const BenchConfig& config) {
  if (absl::Status valid = ValidateConfig(config); !valid.ok()) return valid;
  BenchResult result;
  result.config = config;
  BenchConfig& c = result.config;
  result.workers = c.mode == LoopMode::kClosed ? c.sessions / UnitSessions(c) : c.client_threads;
  if (c.channels == 0) c.channels = std::min(result.workers, 8);

  GdnClientOptions options;
  options.deadline = absl::Seconds(c.deadline_s);
  // Ids are picked here with one routing key per group (session_runner.cc),
  // so the run works through a proxy routing on x-gdn-route.
  options.session_affinity = true;
  options.retry.max_total = absl::Seconds(c.retry_s);
  if (c.retry_s == 0) options.retry.max_attempts = 1;
  absl::Mutex retries_mu;
  std::map<std::string, int64_t> retries;
  options.on_retry = [&retries_mu, &retries](absl::string_view method, const absl::Status&, int) {
    absl::MutexLock lock(&retries_mu);
    ++retries[std::string(method)];
  };
  options.max_message_bytes = c.max_message_bytes;
  options.transport = c.transport;
  options.security = c.security;
  std::string metrics_before;
  if (!c.metrics.empty()) {
    absl::StatusOr<std::string> m = HttpGet(c.metrics, "/metrics");
    if (!m.ok()) return absl::UnavailableError(absl::StrCat("--metrics: ", m.status().message()));
    metrics_before = *m;
  }
  std::vector<std::unique_ptr<GdnClient>> clients;
  RpcCounts setup_rpcs;
  for (int i = 0; i < c.channels; ++i) {
    clients.push_back(std::make_unique<GdnClient>(MakeGdnChannel(c.server, options, i), options));
    // Connects the channel and caches the server's limits.
    absl::StatusOr<v1::ServerInfoResponse> info = clients.back()->GetServerInfo();
    setup_rpcs.Add("GetServerInfo", info.status());
    if (!info.ok()) {
      return absl::Status(info.status().code(), absl::StrCat("GetServerInfo from ", c.server, ": ",
                                                             info.status().message()));
    }
    result.server = *info;
  }
  const int server_layers = result.server.config().num_layers();
  if (c.layers == 0) c.layers = server_layers;
  if (c.fork_at_checkpoint > 0 && c.layers != server_layers) {
    // A fork at a kept position needs a kept state on every layer.
    return absl::InvalidArgumentError(absl::StrCat(
        "--fork_at_checkpoint needs every layer (--layers=0), the server has ", server_layers));
  }
  if (c.layers > server_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--layers ", c.layers, " but the server has ", server_layers));
  }

  const bool counted = c.rounds > 0 || c.num_sessions > 0 || !c.trace.empty();
  const Clock::time_point start = Clock::now();
  const Clock::time_point warmup_end = start + Dur(c.warmup_s);
  const Clock::time_point stop_at =
      counted ? Clock::time_point::max() : warmup_end + Dur(c.duration_s);
  double window_s = c.window_s;
  if (window_s == 0) window_s = counted ? 1.0 : std::max(0.25, c.duration_s / 3);
  const bool decodes = c.decode_steps.UpperBound() > 0 || !c.trace.empty();
  const CallType key = decodes ? CallType::kDecode : CallType::kPrefill;
  Recorder recorder(start, warmup_end, window_s, key);
  RunContext ctx{&c, &clients, result.server.config(), &recorder, start, stop_at, counted};

  const double cpu0 = ProcessCpuSeconds();
  std::atomic<bool> running{true};
  std::thread progress([&] {
    Clock::time_point next = start;
    while (running.load()) {
      next += std::chrono::seconds(1);
      while (running.load() && Clock::now() < next) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (!running.load()) break;
      const ProgressSnapshot p = recorder.Progress();
      if (c.progress) PrintProgress(p, c, key);
    }
  });
  if (c.mode == LoopMode::kClosed) {
    RunClosedLoop(ctx, result.workers);
  } else {
    RunOpenLoop(ctx, result.workers, &result.client_bottleneck);
  }
  const Clock::time_point finish = Clock::now();
  running = false;
  progress.join();

  result.client_load.cpu_s = ProcessCpuSeconds() - cpu0;
  result.client_load.wall_s = Seconds(finish - start);
  result.client_load.cores = UsableCores();
  result.measured = recorder.measured();
  result.warmup = recorder.warmup();
  result.rpcs = recorder.rpcs();
  result.rpcs.Merge(setup_rpcs);
  {
    absl::MutexLock lock(&retries_mu);
    result.retries = retries;
  }
  for (const auto& [method, n] : result.retries) {
    result.rpcs.Add(method, absl::UnavailableError("retried"), n);
  }
  result.windows = recorder.windows();
  result.schedule_lag = recorder.schedule_lag();
  result.late_starts = recorder.late_starts();
  result.draft_tokens = recorder.draft_tokens();
  result.accepted_tokens = recorder.accepted_tokens();
  result.shared_prefills = recorder.shared_prefills();
  result.shared_prefill_ms = recorder.shared_prefill_ms();
  if (c.fork_at_checkpoint > 0) {
    result.shared_prefill_tokens = c.shared_prefix_tokens + c.fork_at_checkpoint;
  }
  result.elapsed_s = Seconds(finish - start);
  result.measured_s = std::max(0.0, Seconds(finish - std::max(start, warmup_end)));

  // Full windows only (the run ended inside the last one).
  std::vector<WindowSummary> summaries;
  const size_t full = static_cast<size_t>(result.measured_s / window_s + 1e-9);
  for (size_t i = 0; i < std::min(full, result.windows.size()); ++i) {
    summaries.push_back({result.windows[i].forward_calls / window_s,
                         result.windows[i].latency.Percentile(99) / 1e6});
  }
  result.stability = CheckStability(summaries, c.stability_pct);

  // Was the client the limit?
  if (result.client_load.utilization() > 0.85) {
    result.client_bottleneck.push_back(absl::StrFormat(
        "client CPU %.0f%% of %d cores (%.2f cores busy): the load generator may be the limit",
        100 * result.client_load.utilization(), result.client_load.cores,
        result.client_load.cores_busy()));
  }
  if (c.mode == LoopMode::kOpen && result.schedule_lag.count() > 0) {
    const double p99_lag_ms = result.schedule_lag.Percentile(99) / 1e6;
    const double gap_ms = c.rate > 0 ? 1000.0 * UnitSessions(c) / c.rate : 0;
    if (p99_lag_ms > std::max(10.0, gap_ms)) {
      result.client_bottleneck.push_back(absl::StrFormat(
          "open loop fell behind its schedule: P99 start lag %.1f ms (mean gap %.1f ms)",
          p99_lag_ms, gap_ms));
    }
  }

  if (!c.metrics.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the last counts land
    absl::StatusOr<std::string> after = HttpGet(c.metrics, "/metrics");
    if (after.ok()) {
      result.have_server_metrics = true;
      result.server_metrics = DiffServerMetrics(metrics_before, *after);
    } else {
      result.client_bottleneck.push_back(
          absl::StrCat("(note) final /metrics scrape failed: ", after.status().message()));
    }
  }
  return result;
}

}  // namespace gdn::client::bench
