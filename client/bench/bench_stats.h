// What a bench run counts. Per call type (create, prefill, decode, fork,
// close) the latency of every successful call and the session-tokens it
// carried; per session the time to first output (TTFO: the session's start -
// its arrival time in open loop - to the end of its first pass over all
// layers) and the decode step time (one step over all layers: time per output
// token); errors by gRPC code; and every RPC sent by method and code (warm-up
// included) so a run can be checked against the server's gdn_requests_total.
//
// Recorder (recorder.h) fills these under its lock; Merge combines them.
#ifndef GDN_CLIENT_BENCH_BENCH_STATS_H_
#define GDN_CLIENT_BENCH_BENCH_STATS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "client/bench/latency_histogram.h"

namespace gdn::client::bench {

enum class CallType { kCreate = 0, kPrefill, kDecode, kFork, kClose };
constexpr int kNumCallTypes = 5;
const char* CallTypeName(CallType type);  // "create", "prefill", ...
// The gRPC method a call type uses.
const char* CallTypeMethod(CallType type);  // "CreateSession", "Forward", ...

struct PhaseStats {
  LatencyHistogram latency;  // successful calls, nanoseconds
  int64_t calls = 0;         // successful calls
  int64_t failed = 0;        // failed calls
  int64_t token_layers = 0;  // session-tokens summed over those calls (one layer each)

  void Merge(const PhaseStats& other);
};

struct BenchStats {
  std::array<PhaseStats, kNumCallTypes> by_type;
  LatencyHistogram ttfo;         // per session, nanoseconds
  LatencyHistogram decode_step;  // per session and step, nanoseconds
  std::map<std::string, int64_t> errors;  // failed calls by gRPC code name
  int64_t sessions_started = 0;
  int64_t sessions_completed = 0;  // create .. close without an error
  int64_t rounds_completed = 0;    // units of work (a group, or a parent + its forks)

  PhaseStats& of(CallType t) { return by_type[static_cast<int>(t)]; }
  const PhaseStats& of(CallType t) const { return by_type[static_cast<int>(t)]; }
  const PhaseStats& prefill() const { return of(CallType::kPrefill); }
  const PhaseStats& decode() const { return of(CallType::kDecode); }
  int64_t forward_calls() const { return prefill().calls + decode().calls; }
  int64_t token_layers() const { return prefill().token_layers + decode().token_layers; }

  void RecordError(CallType type, const absl::Status& status);
  int64_t failed_calls() const;
  void Merge(const BenchStats& other);
};

// RPCs as the server counts them: method name -> code name -> count.
struct RpcCounts {
  std::map<std::string, std::map<std::string, int64_t>> by_method;

  void Add(const std::string& method, const absl::Status& status, int64_t n = 1);
  int64_t Total(const std::string& method) const;
  int64_t Count(const std::string& method, const std::string& code) const;
  void Merge(const RpcCounts& other);
};

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_BENCH_STATS_H_
