// The one place a run's workers record into (thread-safe, one mutex: a bench
// makes at most tens of thousands of calls per second, and the lock is held
// for a few hundred nanoseconds per call).
//
// A call counts as warm-up when it started before the warm-up ended, else as
// measured. Measured Forward calls are also binned by their end time into
// windows of `window_s` (stability.h compares them), and every call feeds a
// one-second progress view (Progress()).
#ifndef GDN_CLIENT_BENCH_RECORDER_H_
#define GDN_CLIENT_BENCH_RECORDER_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "client/bench/bench_stats.h"

namespace gdn::client::bench {

using Clock = std::chrono::steady_clock;

int64_t Nanos(Clock::duration d);
double Seconds(Clock::duration d);

// One measurement window's Forward calls.
struct WindowStats {
  int64_t forward_calls = 0;
  int64_t token_layers = 0;
  LatencyHistogram latency;  // of the window's key phase (decode when the workload decodes)
};

struct ProgressSnapshot {
  double elapsed_s = 0;
  int64_t calls_since_last = 0;   // every call type
  double seconds_since_last = 0;
  int64_t key_p99_ns = 0;         // key phase, since the last snapshot
  int64_t errors = 0;             // whole run
  int64_t sessions_started = 0;   // whole run
  int64_t behind_schedule = 0;    // open loop: arrivals started late (whole run)
};

class Recorder {
 public:
  // `key_phase` is kDecode or kPrefill: the phase windows and progress track.
  Recorder(Clock::time_point start, Clock::time_point warmup_end, double window_s,
           CallType key_phase);

  // A finished call: ok or failed with `status`; `token_layers` for Forward;
  // `rpc_parts` RPCs it took (a split Forward takes several).
  void RecordCall(CallType type, Clock::time_point t0, Clock::time_point t1,
                  const absl::Status& status, int64_t token_layers = 0, int64_t rpc_parts = 1);
  void RecordRpc(const std::string& method, const absl::Status& status);
  void RecordSessionStarts(Clock::time_point t, int sessions);
  void RecordTtfo(Clock::time_point session_start, Clock::time_point first_output);
  void RecordDecodeStep(Clock::time_point t0, Clock::time_point t1);
  // A speculative decode step: draft tokens sent and accepted (whole run).
  void RecordDraft(int64_t drafted, int64_t accepted);
  // --fork_at_checkpoint: a parent's prefill over every layer (whole run).
  void RecordSharedPrefill(Clock::time_point t0, Clock::time_point t1);
  void RecordUnitDone(Clock::time_point t, int sessions, bool ok);
  // Open loop: how late a unit started after its scheduled arrival.
  void RecordScheduleLag(Clock::time_point scheduled, Clock::time_point started);

  ProgressSnapshot Progress();

  // After the workers have stopped.
  const BenchStats& measured() const { return measured_; }
  const BenchStats& warmup() const { return warmup_; }
  const RpcCounts& rpcs() const { return rpcs_; }
  const std::vector<WindowStats>& windows() const { return windows_; }
  const LatencyHistogram& schedule_lag() const { return schedule_lag_; }
  int64_t late_starts() const { return late_starts_; }
  int64_t draft_tokens() const { return draft_tokens_; }
  int64_t accepted_tokens() const { return accepted_tokens_; }
  int64_t shared_prefills() const { return shared_prefills_; }
  double shared_prefill_ms() const {
    return shared_prefills_ > 0 ? shared_prefill_ns_ / 1e6 / shared_prefills_ : 0;
  }

 private:
  BenchStats& StatsAt(Clock::time_point t) { return t >= warmup_end_ ? measured_ : warmup_; }

  const Clock::time_point start_, warmup_end_;
  const double window_s_;
  const CallType key_phase_;

  std::mutex mu_;
  BenchStats measured_, warmup_;
  RpcCounts rpcs_;
  std::vector<WindowStats> windows_;
  LatencyHistogram schedule_lag_;
  int64_t late_starts_ = 0;  // more than 1 ms behind schedule
  int64_t draft_tokens_ = 0;
  int64_t accepted_tokens_ = 0;
  int64_t shared_prefills_ = 0;
  double shared_prefill_ns_ = 0;
  // Progress since the last snapshot.
  Clock::time_point last_progress_;
  int64_t progress_calls_ = 0;
  int64_t total_errors_ = 0;
  int64_t total_sessions_ = 0;
  LatencyHistogram progress_latency_;
};

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_RECORDER_H_
