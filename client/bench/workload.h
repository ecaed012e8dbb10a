// gdn-bench's load, the way model runners drive the server. The unit of work
// is a group of `sessions_per_call` sessions driven together (one Forward per
// layer carries the whole group): create them, prefill (one Forward per
// layer), decode steps (per step one Forward per layer, one token per
// session still decoding, `think_ms` between steps), close them. With
// `fork_fanout` > 0 a unit is instead one parent session prefilled with
// `shared_prefix_tokens`, forked `fork_fanout` times and closed; the children
// then run in groups of `sessions_per_call`, each group on its own thread,
// continuing from the prefix with their own prefill and decode.
//
// Closed loop: sessions / unit-size workers, each running units back to back.
// Open loop: units arrive at `rate` sessions/s (Poisson or gamma gaps, or the
// trace's arrival times) and run on a pool of `client_threads` threads; an
// arrival that finds no free thread starts late, which the report calls out
// (the client, not the server, is then the limit).
//
// A run lasts `warmup_s` + `duration_s`, or until `rounds` units per worker
// (closed) / `num_sessions` sessions (open) have run. Calls that start during
// the warm-up are reported apart.
#ifndef GDN_CLIENT_BENCH_WORKLOAD_H_
#define GDN_CLIENT_BENCH_WORKLOAD_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/bench/bench_stats.h"
#include "client/bench/client_load.h"
#include "client/bench/length_spec.h"
#include "client/bench/recorder.h"
#include "client/bench/server_metrics.h"
#include "client/bench/stability.h"
#include "client/bench/trace.h"
#include "client/channel_security.h"
#include "gdn/v1/gdn.pb.h"
#include "proto/grpc_transport.h"

namespace gdn::client::bench {

enum class LoopMode { kClosed, kOpen };

struct BenchConfig {
  std::string server = "127.0.0.1:50051";
  std::string metrics;  // HOST:PORT of the server's /metrics; empty: not scraped
  // TLS and bearer token of the gRPC channels (--tls*, --token_file).
  ChannelSecurity security;

  LoopMode mode = LoopMode::kClosed;
  int sessions = 8;           // closed loop: concurrent sessions
  double rate = 0;            // open loop: sessions per second
  std::string arrival = "poisson";  // open loop: poisson or gamma
  double burstiness = 1.0;    // gamma shape (1 = Poisson, < 1 burstier)
  int num_sessions = 0;       // open loop: sessions to start (0: by duration)
  int client_threads = 64;    // open loop: units in flight at most

  LengthSpec prefill_tokens = LengthSpec::Fixed(128);
  LengthSpec decode_steps = LengthSpec::Fixed(32);
  std::vector<TraceRecord> trace;  // non-empty: open-loop replay
  std::string trace_file;          // for the report
  double trace_speed = 1.0;        // arrival times divided by this
  int layers = 0;                  // 0: all of the server's layers
  double think_ms = 0;             // between decode steps of a session
  int shared_prefix_tokens = 0;    // fork mode: the parent's prefill
  int fork_fanout = 0;             // > 0: fork mode
  // Fork mode with prefix reuse (> 0, a multiple of 64): the parent prefills
  // the shared prefix and this many tokens more (its own conversation),
  // keeping a state every this many tokens (SequenceSpec.checkpoint_interval);
  // the children fork at the last kept position within the prefix
  // (ForkSessionRequest.at_position) and prefill the rest of it themselves.
  int fork_at_checkpoint = 0;
  // Fork mode with a warm prefix (a cached system prompt): each client
  // thread prefills its parent once and keeps it; later units only fork it,
  // so their sessions' time to first output is fork + their own prefill.
  bool warm_prefix = false;
  int sessions_per_call = 1;       // sessions batched into one Forward
  // Speculative decoding (> 0, 2..8): each decode step is a draft of this
  // many tokens per session; after the first, each draft token is accepted
  // with probability acceptance_rate until the first rejection, and the
  // next step's position accepts that many (SequenceSpec.draft).
  int draft_tokens = 0;
  double acceptance_rate = 0.7;
  // Tokens per session in each plain decode step (1..8): a draft's
  // baseline is a plain decode of as many tokens (--decode_tokens=T).
  int decode_tokens = 1;
  bool stream = false;             // ForwardStream instead of unary Forward
  bool shm = false;                // unary Forward with tensors in shared memory regions
  bool cuda_ipc = false;           // unary Forward with tensors in CUDA IPC regions
  // Unary Forward through a same-host channel (client/forward_channel.h)
  // instead of the Forward RPC; any of unary, shm, cuda_ipc.
  bool channel = false;

  int channels = 0;           // 0: one per thread, at most 8
  double warmup_s = 0;
  double duration_s = 10;     // when rounds / num_sessions are 0
  int rounds = 0;             // closed loop: > 0: exactly this many units per worker
  double window_s = 0;        // measurement window (0: measured time / 3)
  double stability_pct = 20;  // consecutive windows may differ this much
  uint64_t seed = 1;
  double deadline_s = 60;     // per call
  double retry_s = 10;        // UNAVAILABLE retried for up to this long per call (0: never)
  int64_t max_message_bytes = 64 << 20;
  // > 0: a call whose request is larger goes in parts of at most this many
  // bytes (client/forward_parts_split.h), all sent over the lane's stream
  // before the first answer is read, so the server stages and runs the
  // first parts while the rest is still in flight (--transport=stream only).
  int64_t part_bytes = 0;
  // > 1: the parts of a split call go over this many connections at once,
  // in turn (client/parallel_forward_streams.h; each lane opens a stream on
  // each; the pieces of a cut sequence too: the server applies them in
  // order), so that a large call is not held to one connection's
  // throughput (--transport=stream only).
  int connections = 1;
  // How long a connection's idle thread polls for the next call, and the
  // lane for the threads' ends, before sleeping
  // (ParallelForwardStreams' poll; -1: 1000 us with 8 or more hardware
  // threads, else 0).
  int64_t connection_poll_us = -1;
  // The channels' HTTP/2 window, frame and read sizes (proto/grpc_transport.h;
  // zeros: gRPC's defaults). Its max_message_bytes is not used.
  wire::TransportOptions transport;
  bool progress = true;       // a line on stderr each second
  std::string label;          // e.g. "concurrency=4" in a sweep
};

// InvalidArgument naming the first bad flag.
absl::Status ValidateConfig(const BenchConfig& config);
// Sessions in one unit of work (a group, or a parent's children).
int UnitSessions(const BenchConfig& config);

struct BenchResult {
  BenchConfig config;  // with layers / channels resolved
  int workers = 0;     // closed: workers; open: client threads
  v1::ServerInfoResponse server;
  BenchStats measured;  // calls that started after the warm-up
  BenchStats warmup;    // calls that started during the warm-up
  RpcCounts rpcs;       // every RPC sent, warm-up included
  std::vector<WindowStats> windows;
  StabilityVerdict stability;
  double elapsed_s = 0;   // the whole run
  double measured_s = 0;  // from the end of the warm-up to the end
  ClientLoad client_load;
  LatencyHistogram schedule_lag;  // open loop, measured arrivals
  int64_t late_starts = 0;        // open loop: > 1 ms behind schedule
  std::vector<std::string> client_bottleneck;  // reasons; empty: the client kept up
  // Tries that failed with UNAVAILABLE and were retried, by method (also
  // counted in `rpcs`); the calls themselves count once, by their outcome.
  std::map<std::string, int64_t> retries;
  bool have_server_metrics = false;
  ServerMetricsDelta server_metrics;  // whole run (warm-up included)
  // --draft_tokens: draft tokens sent and accepted (per session, one layer).
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  // --fork_at_checkpoint: the parents' prefills (every layer) and their tokens.
  int64_t shared_prefills = 0;
  double shared_prefill_ms = 0;  // mean
  int64_t shared_prefill_tokens = 0;  // per parent
};

absl::StatusOr<BenchResult> RunBench(const BenchConfig& config);

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_WORKLOAD_H_
