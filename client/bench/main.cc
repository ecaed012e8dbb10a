// gdn-bench: a load generator for gdn-server (README.md in this folder).
//
//   gdn-bench --server=HOST:PORT --sessions=16 --prefill_tokens=512 --decode_steps=64
//   gdn-bench --mode=open --rate=20 --arrival=gamma --burstiness=0.5 --duration_s=30
//   gdn-bench --sweep=concurrency:1,2,4,8 --json_out=s.json --plot=s.png
//   gdn-bench --slo_p99_ms=20 --slo_phase=decode --slo_load=concurrency:1:256
//   gdn-bench --compare_echo=HOST:PORT --compare_rounds=3 --json_out=r.json
//
// Exit codes: 0 done, 1 the run failed (server unreachable, nothing
// succeeded, cannot write an output), 2 bad flags.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "client/bench/compare_echo.h"
#include "client/bench/report.h"
#include "client/bench/sweep.h"
#include "client/bench/workload.h"
#include "client/grpc_status.h"
#include "client/security_flags.h"
#include "proto/grpc_transport.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "gdn-server address HOST:PORT");
ABSL_FLAG(std::string, metrics, "",
          "the server's Prometheus endpoint HOST:PORT: scraped before and after, reported beside "
          "the client's view");
ABSL_FLAG(std::string, mode, "closed", "closed (fixed concurrency) or open (arrivals at --rate)");
ABSL_FLAG(int, sessions, 8, "closed loop: concurrent sessions");
ABSL_FLAG(double, rate, 0, "open loop: session arrivals per second");
ABSL_FLAG(std::string, arrival, "poisson", "open loop arrivals: poisson or gamma");
ABSL_FLAG(double, burstiness, 1.0, "gamma shape: 1 = Poisson, < 1 burstier, > 1 more regular");
ABSL_FLAG(int, num_sessions, 0, "open loop: sessions to start, then stop (0: by --duration_s)");
ABSL_FLAG(int, client_threads, 64, "open loop: client threads (units in flight at most)");
ABSL_FLAG(std::string, prefill_tokens, "128",
          "prefill tokens per session: N, A:B, uniform:A:B, normal:MEAN:STD, lognormal:MEDIAN:SIGMA");
ABSL_FLAG(std::string, decode_steps, "32", "decode steps per session (same forms)");
ABSL_FLAG(std::string, trace_file, "",
          "replay sessions from a JSONL or .csv trace (arrival_s, prefill_tokens, decode_steps); "
          "implies --mode=open");
ABSL_FLAG(double, trace_speed, 1.0, "trace arrival times are divided by this");
ABSL_FLAG(int, layers, 0, "layers per step (0: all of the server's)");
ABSL_FLAG(double, think_ms, 0, "think time between a session's decode steps");
ABSL_FLAG(int, shared_prefix_tokens, 0, "fork mode: tokens of the shared prefix");
ABSL_FLAG(int, fork_fanout, 0, "fork mode: sessions forked from each prefilled prefix");
ABSL_FLAG(int, fork_at_checkpoint, 0,
          "fork mode with prefix reuse: the parent prefills this many tokens past the prefix "
          "keeping a state every this many (a multiple of 64); the children fork at the last "
          "kept state within the prefix; the report estimates the time to first output saved");
ABSL_FLAG(bool, warm_prefix, false,
          "fork mode: each client thread prefills its parent once and keeps it for later units "
          "(a cached shared prompt: their TTFO is fork + own prefill)");
ABSL_FLAG(int, sessions_per_call, 1, "sessions batched into one Forward call");
ABSL_FLAG(int, draft_tokens, 0,
          "speculative decoding: each decode step is a draft of this many tokens (2..8; 0: off)");
ABSL_FLAG(int, decode_tokens, 1,
          "tokens per session in each plain decode step (1..8; e.g. the baseline of "
          "--draft_tokens=T is --decode_tokens=T)");
ABSL_FLAG(double, acceptance_rate, 0.7,
          "speculative decoding: probability that each draft token after the first is accepted "
          "(up to the first rejection)");
ABSL_FLAG(std::string, transport, "unary",
          "unary (Forward), stream (ForwardStream), shm (Forward with tensors and o in POSIX "
          "shared memory registered with the server: same host only), or cuda_ipc (the same "
          "in GPU memory shared through CUDA IPC: same GPU, CUDA builds)");
ABSL_FLAG(std::string, control, "grpc",
          "how unary Forward calls reach the server: grpc (the Forward RPC) or channel (a "
          "same-host shared-memory channel, OpenChannel: no socket round trip; with "
          "--transport=unary, shm or cuda_ipc)");
ABSL_FLAG(int, channels, 0, "gRPC channels (0: one per thread, at most 8)");
ABSL_FLAG(double, warmup_s, 0, "seconds of warm-up whose calls are not measured");
ABSL_FLAG(double, duration_s, 10, "measured seconds (unless --rounds / --num_sessions)");
ABSL_FLAG(int, rounds, 0, "closed loop: units per worker, then stop (0: by duration)");
ABSL_FLAG(double, window_s, 0, "measurement window for the stability check (0: measured / 3)");
ABSL_FLAG(double, stability_pct, 20, "consecutive windows within this % are stable");
ABSL_FLAG(uint64_t, seed, 1, "seed of the random inputs and lengths");
ABSL_FLAG(double, deadline_s, 60, "per-call deadline in seconds");
ABSL_FLAG(double, retry_s, 10,
          "UNAVAILABLE (a draining server, a proxy with no server) is retried with backoff "
          "for up to this many seconds per call; 0: never");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20, "largest gRPC message");
ABSL_FLAG(int64_t, part_bytes, 0,
          "> 0: calls with larger requests go in parts of at most this many bytes, "
          "pipelined over the stream (--transport=stream only; 0: split only at the "
          "message limit)");
ABSL_FLAG(int, connections, 1,
          "> 1: the parts of a split call (--part_bytes) go over this many connections "
          "at once, one stream on each (--transport=stream only)");
ABSL_FLAG(int64_t, connection_poll_us, -1,
          "--connections > 1: how long a connection's idle thread polls for the next call "
          "before it sleeps (-1: 1000 with 8 or more hardware threads, else 0)");
ABSL_FLAG(bool, progress, true, "a progress line on stderr each second");
ABSL_FLAG(std::string, sweep, "", "concurrency:1,2,4,8 or rate:5,10,20: one run per load");
ABSL_FLAG(double, slo_p99_ms, 0, "> 0: search the highest load whose P99 meets this");
ABSL_FLAG(std::string, slo_phase, "decode",
          "the SLO's latency: create, prefill, decode, fork, close, ttfo, decode_step");
ABSL_FLAG(std::string, slo_load, "concurrency:1:256", "the SLO search's range: KIND:MIN:MAX");
ABSL_FLAG(int, slo_max_probes, 10, "runs the SLO search may make");
ABSL_FLAG(std::string, compare_ceiling, "",
          "HOST:PORT of a --diagnostic_no_compute gdn-server: rerun the same traffic there and "
          "report how far this run is from the transport ceiling");
ABSL_FLAG(std::string, compare_echo, "",
          "HOST:PORT (or unix:/path) of a gdn-echo with the server's shape: run the same workload "
          "there and here in one run, the two taking turns, and report server/echo P50 and P99 "
          "ratios per call type");
ABSL_FLAG(int, compare_rounds, 3,
          "--compare_echo: turns per arm (ABBA order); --duration_s, --warmup_s and --rounds are "
          "split evenly over them");
ABSL_FLAG(bool, default_transport, false,
          "channels with gRPC's default HTTP/2 window, frame and read sizes (the 'before' figures); "
          "overrides the three size flags");
ABSL_FLAG(int32_t, stream_window_bytes, 64 << 20,
          "per-stream flow-control window the client offers; 0: gRPC's default");
ABSL_FLAG(int32_t, max_frame_bytes, 1 << 20, "largest HTTP/2 frame accepted; 0: gRPC's default");
ABSL_FLAG(int32_t, max_read_chunk_bytes, 4 << 20, "bytes per socket read; 0: gRPC's default");
ABSL_FLAG(std::string, json_out, "", "write the JSON report here");
ABSL_FLAG(std::string, csv_out, "", "write the CSV report here (one row per run)");
ABSL_FLAG(std::string, plot, "", "sweeps: write a PNG of latency and throughput vs load here");
ABSL_FLAG(std::string, plot_script, GDN_BENCH_PLOT_SCRIPT, "plot_report.py to run for --plot");

namespace {

using namespace gdn::client::bench;

int BadFlags(const absl::Status& s) {
  std::cerr << "gdn-bench: " << s.message() << "\n(see gdn-bench --help)\n";
  return 2;
}

bool WriteFile(const std::string& path, const std::string& text) {
  if (path.empty()) return true;
  std::ofstream file(path, std::ios::trunc);
  file << text;
  if (!file) std::cerr << "gdn-bench: cannot write " << path << "\n";
  return static_cast<bool>(file);
}

absl::StatusOr<BenchConfig> ConfigFromFlags() {
  BenchConfig c;
  c.server = absl::GetFlag(FLAGS_server);
  c.metrics = absl::GetFlag(FLAGS_metrics);
  absl::StatusOr<gdn::client::ChannelSecurity> security = gdn::client::ChannelSecurityFromFlags();
  if (!security.ok()) return security.status();
  c.security = std::move(*security);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode != "closed" && mode != "open") {
    return absl::InvalidArgumentError(absl::StrCat("--mode must be closed or open, got '", mode, "'"));
  }
  c.mode = mode == "open" ? LoopMode::kOpen : LoopMode::kClosed;
  c.sessions = absl::GetFlag(FLAGS_sessions);
  c.rate = absl::GetFlag(FLAGS_rate);
  c.arrival = absl::GetFlag(FLAGS_arrival);
  c.burstiness = absl::GetFlag(FLAGS_burstiness);
  c.num_sessions = absl::GetFlag(FLAGS_num_sessions);
  c.client_threads = absl::GetFlag(FLAGS_client_threads);
  absl::StatusOr<LengthSpec> prefill =
      LengthSpec::Parse(absl::GetFlag(FLAGS_prefill_tokens), "prefill_tokens", 0);
  if (!prefill.ok()) return prefill.status();
  c.prefill_tokens = *prefill;
  absl::StatusOr<LengthSpec> decode =
      LengthSpec::Parse(absl::GetFlag(FLAGS_decode_steps), "decode_steps", 0);
  if (!decode.ok()) return decode.status();
  c.decode_steps = *decode;
  c.trace_file = absl::GetFlag(FLAGS_trace_file);
  if (!c.trace_file.empty()) {
    absl::StatusOr<std::vector<TraceRecord>> trace = LoadTrace(c.trace_file);
    if (!trace.ok()) return absl::InvalidArgumentError(absl::StrCat("--trace_file: ", trace.status().message()));
    c.trace = std::move(*trace);
    c.mode = LoopMode::kOpen;
  }
  c.trace_speed = absl::GetFlag(FLAGS_trace_speed);
  c.layers = absl::GetFlag(FLAGS_layers);
  c.think_ms = absl::GetFlag(FLAGS_think_ms);
  c.shared_prefix_tokens = absl::GetFlag(FLAGS_shared_prefix_tokens);
  c.fork_fanout = absl::GetFlag(FLAGS_fork_fanout);
  c.fork_at_checkpoint = absl::GetFlag(FLAGS_fork_at_checkpoint);
  c.warm_prefix = absl::GetFlag(FLAGS_warm_prefix);
  c.sessions_per_call = absl::GetFlag(FLAGS_sessions_per_call);
  c.draft_tokens = absl::GetFlag(FLAGS_draft_tokens);
  c.acceptance_rate = absl::GetFlag(FLAGS_acceptance_rate);
  c.decode_tokens = absl::GetFlag(FLAGS_decode_tokens);
  const std::string transport = absl::GetFlag(FLAGS_transport);
  if (transport != "unary" && transport != "stream" && transport != "shm" &&
      transport != "cuda_ipc") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--transport must be unary, stream, shm or cuda_ipc, got '", transport, "'"));
  }
  c.stream = transport == "stream";
  c.shm = transport == "shm";
  c.cuda_ipc = transport == "cuda_ipc";
  const std::string control = absl::GetFlag(FLAGS_control);
  if (control != "grpc" && control != "channel") {
    return absl::InvalidArgumentError(
        absl::StrCat("--control must be grpc or channel, got '", control, "'"));
  }
  c.channel = control == "channel";
  if (c.channel && c.stream) {
    return absl::InvalidArgumentError(
        "--control=channel carries unary calls: not with --transport=stream");
  }
  c.channels = absl::GetFlag(FLAGS_channels);
  c.warmup_s = absl::GetFlag(FLAGS_warmup_s);
  c.duration_s = absl::GetFlag(FLAGS_duration_s);
  c.rounds = absl::GetFlag(FLAGS_rounds);
  c.window_s = absl::GetFlag(FLAGS_window_s);
  c.stability_pct = absl::GetFlag(FLAGS_stability_pct);
  c.seed = absl::GetFlag(FLAGS_seed);
  c.deadline_s = absl::GetFlag(FLAGS_deadline_s);
  c.retry_s = absl::GetFlag(FLAGS_retry_s);
  c.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  c.part_bytes = absl::GetFlag(FLAGS_part_bytes);
  c.connections = absl::GetFlag(FLAGS_connections);
  c.connection_poll_us = absl::GetFlag(FLAGS_connection_poll_us);
  if (absl::GetFlag(FLAGS_default_transport)) {
    c.transport.stream_window_bytes = c.transport.max_frame_bytes = 0;
    c.transport.max_read_chunk_bytes = 0;
  } else {
    c.transport.stream_window_bytes = absl::GetFlag(FLAGS_stream_window_bytes);
    c.transport.max_frame_bytes = absl::GetFlag(FLAGS_max_frame_bytes);
    c.transport.max_read_chunk_bytes = absl::GetFlag(FLAGS_max_read_chunk_bytes);
    if (c.transport.stream_window_bytes < 0 || c.transport.max_frame_bytes < 0 ||
        c.transport.max_read_chunk_bytes < 0) {
      return absl::InvalidArgumentError("transport sizes must be >= 0 (0: gRPC's default)");
    }
  }
  c.progress = absl::GetFlag(FLAGS_progress);
  return c;
}

// Runs plot_report.py on the JSON report; says how when it cannot.
bool Plot(const std::string& json_path, const std::string& png) {
  const std::string script = absl::GetFlag(FLAGS_plot_script);
  const std::string how = absl::StrCat("python3 ", script, " ", json_path, " ", png);
  if (std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    std::cerr << "gdn-bench: --plot needs python3 with matplotlib (python3 -m pip install "
                 "matplotlib); then run: "
              << how << "\n";
    return false;
  }
  if (std::system(how.c_str()) != 0) {
    std::cerr << "gdn-bench: plotting failed: " << how << "\n";
    return false;
  }
  std::cerr << "gdn-bench: wrote " << png << "\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "gdn-bench --server=HOST:PORT [--mode=closed --sessions=N | --mode=open --rate=R] "
      "[--prefill_tokens=SPEC --decode_steps=SPEC --layers=L --sessions_per_call=B] "
      "[--sweep=KIND:LOADS | --slo_p99_ms=MS --slo_load=KIND:MIN:MAX] "
      "[--json_out=F --csv_out=F --plot=F.png]  (client/bench/README.md)");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  gdn::wire::KeepFreedMemoryForLargeMessages();  // as gdn-server does
  gdn::wire::SkipMutexDeadlockDetection();
  if (args.size() > 1) {
    std::cerr << "gdn-bench: unexpected argument '" << args[1] << "' (flags only)\n";
    return 2;
  }
  absl::StatusOr<BenchConfig> config = ConfigFromFlags();
  if (!config.ok()) return BadFlags(config.status());
  const std::string sweep_flag = absl::GetFlag(FLAGS_sweep);
  const double slo = absl::GetFlag(FLAGS_slo_p99_ms);
  const std::string plot = absl::GetFlag(FLAGS_plot);
  const std::string ceiling_server = absl::GetFlag(FLAGS_compare_ceiling);
  const std::string echo_server = absl::GetFlag(FLAGS_compare_echo);
  const int compare_rounds = absl::GetFlag(FLAGS_compare_rounds);
  std::string json_out = absl::GetFlag(FLAGS_json_out);
  if (!sweep_flag.empty() && slo > 0) {
    return BadFlags(absl::InvalidArgumentError("--sweep and --slo_p99_ms: pick one"));
  }
  if (slo < 0) return BadFlags(absl::InvalidArgumentError("--slo_p99_ms must be > 0"));
  if (!IsPhaseName(absl::GetFlag(FLAGS_slo_phase))) {
    return BadFlags(absl::InvalidArgumentError(absl::StrCat(
        "--slo_phase must be create, prefill, decode, fork, close, ttfo or decode_step, got '",
        absl::GetFlag(FLAGS_slo_phase), "'")));
  }
  if (!plot.empty() && sweep_flag.empty() && slo == 0) {
    return BadFlags(absl::InvalidArgumentError("--plot is for --sweep or --slo_p99_ms runs"));
  }
  if (!ceiling_server.empty() && (!sweep_flag.empty() || slo > 0)) {
    return BadFlags(absl::InvalidArgumentError("--compare_ceiling is for single runs"));
  }
  if (!echo_server.empty() && (!sweep_flag.empty() || slo > 0)) {
    return BadFlags(absl::InvalidArgumentError("--compare_echo is for single runs"));
  }
  if (!echo_server.empty() && !config->trace.empty()) {
    return BadFlags(absl::InvalidArgumentError("--compare_echo cannot split --trace_file into turns"));
  }
  if (compare_rounds < 1) return BadFlags(absl::InvalidArgumentError("--compare_rounds must be >= 1"));

  if (!sweep_flag.empty() || slo > 0) {
    absl::StatusOr<SweepResult> sweep;
    if (!sweep_flag.empty()) {
      absl::StatusOr<SweepSpec> spec = ParseSweep(sweep_flag);
      if (!spec.ok()) return BadFlags(spec.status());
      // Validate every point before running any.
      for (double load : spec->loads) {
        if (absl::Status s = ValidateConfig(AtLoad(*config, spec->kind, load)); !s.ok()) return BadFlags(s);
      }
      sweep = RunSweep(*config, *spec);
    } else {
      absl::StatusOr<LoadRange> range = ParseLoadRange(absl::GetFlag(FLAGS_slo_load));
      if (!range.ok()) return BadFlags(range.status());
      if (absl::Status s = ValidateConfig(AtLoad(*config, range->kind, range->min)); !s.ok()) return BadFlags(s);
      sweep = RunSloSearch(*config, *range, slo, absl::GetFlag(FLAGS_slo_phase),
                           absl::GetFlag(FLAGS_slo_max_probes));
    }
    if (!sweep.ok()) {
      std::cerr << "gdn-bench: " << gdn::client::GrpcCodeName(sweep.status().code()) << ": "
                << sweep.status().message() << "\n";
      return sweep.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
    for (const BenchResult& r : sweep->points) std::cout << FormatTextReport(r) << "\n";
    std::cout << FormatSweepText(*sweep);
    if (json_out.empty() && !plot.empty()) json_out = plot + ".json";
    bool ok = WriteFile(json_out, FormatSweepJson(*sweep)) &&
              WriteFile(absl::GetFlag(FLAGS_csv_out), FormatSweepCsv(*sweep));
    if (ok && !plot.empty()) Plot(json_out, plot);
    return ok ? 0 : 1;
  }

  if (absl::Status valid = ValidateConfig(*config); !valid.ok()) return BadFlags(valid);
  // With --compare_echo the run is the server's turns merged, the echo's
  // beside it.
  std::unique_ptr<CompareEchoResult> compared;
  absl::StatusOr<BenchResult> result;
  if (echo_server.empty()) {
    result = RunBench(*config);
  } else {
    absl::StatusOr<CompareEchoResult> c = RunCompareEcho(*config, echo_server, compare_rounds);
    if (c.ok()) {
      compared = std::make_unique<CompareEchoResult>(*std::move(c));
      result = compared->server;
      if (compared->echo.server.backend() != "echo") {
        std::cerr << "gdn-bench: WARNING: --compare_echo server " << echo_server
                  << " is not a gdn-echo (backend '" << compared->echo.server.backend()
                  << "'); its numbers are not the transport's ceiling\n";
      }
    } else {
      result = c.status();
    }
  }
  if (!result.ok()) {
    std::cerr << "gdn-bench: " << gdn::client::GrpcCodeName(result.status().code()) << ": "
              << result.status().message() << "\n";
    return result.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::unique_ptr<BenchResult> ceiling;
  if (!ceiling_server.empty()) {
    BenchConfig c = *config;
    c.server = ceiling_server;
    c.metrics.clear();
    c.label = "ceiling";
    absl::StatusOr<BenchResult> r = RunBench(c);
    if (!r.ok()) {
      std::cerr << "gdn-bench: --compare_ceiling: " << r.status().message() << "\n";
      return 1;
    }
    if (r->server.device().find("DIAGNOSTIC") == std::string::npos) {
      std::cerr << "gdn-bench: WARNING: --compare_ceiling server " << ceiling_server
                << " is not in --diagnostic_no_compute mode (device '" << r->server.device()
                << "'); its numbers are not a transport ceiling\n";
    }
    ceiling = std::make_unique<BenchResult>(std::move(*r));
  }
  std::string text = FormatTextReport(*result, ceiling.get());
  JsonFields extra;
  if (compared != nullptr) {
    text += FormatCompareEchoText(*compared);
    extra.emplace_back("compare_echo", CompareEchoJson(*compared));
  }
  std::cout << text;
  bool ok = WriteFile(json_out, FormatJsonReport(*result, ceiling.get(), extra) + "\n") &&
            WriteFile(absl::GetFlag(FLAGS_csv_out), CsvHeader() + CsvRow(*result));
  // Failed calls are part of the measurement, not a failure of the tool; but
  // a run in which nothing succeeded is.
  const int64_t succeeded = result->measured.forward_calls() + result->warmup.forward_calls();
  return ok && succeeded > 0 ? 0 : 1;
}
