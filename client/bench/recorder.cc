#include "client/bench/recorder.h"

#include <cmath>

namespace gdn::client::bench {

int64_t Nanos(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Recorder::Recorder(Clock::time_point start, Clock::time_point warmup_end, double window_s,
                   CallType key_phase)
    : start_(start), warmup_end_(warmup_end), window_s_(window_s), key_phase_(key_phase),
      last_progress_(start) {}

void Recorder::RecordCall(CallType type, Clock::time_point t0, Clock::time_point t1,
                          const absl::Status& status, int64_t token_layers, int64_t rpc_parts) {
  std::lock_guard<std::mutex> lock(mu_);
  rpcs_.Add(CallTypeMethod(type), status, status.ok() ? rpc_parts : 1);
  ++progress_calls_;
  BenchStats& stats = StatsAt(t0);
  if (!status.ok()) {
    stats.RecordError(type, status);
    ++total_errors_;
    return;
  }
  const int64_t ns = Nanos(t1 - t0);
  PhaseStats& phase = stats.of(type);
  phase.latency.Record(ns);
  ++phase.calls;
  phase.token_layers += token_layers;
  if (type == key_phase_) progress_latency_.Record(ns);
  if (t0 >= warmup_end_ && (type == CallType::kPrefill || type == CallType::kDecode) &&
      window_s_ > 0) {
    const size_t w = static_cast<size_t>(std::floor(Seconds(t1 - warmup_end_) / window_s_));
    if (w >= windows_.size()) windows_.resize(w + 1);
    ++windows_[w].forward_calls;
    windows_[w].token_layers += token_layers;
    if (type == key_phase_) windows_[w].latency.Record(ns);
  }
}

void Recorder::RecordRpc(const std::string& method, const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  rpcs_.Add(method, status);
}

void Recorder::RecordSessionStarts(Clock::time_point t, int sessions) {
  std::lock_guard<std::mutex> lock(mu_);
  StatsAt(t).sessions_started += sessions;
  total_sessions_ += sessions;
}

void Recorder::RecordTtfo(Clock::time_point session_start, Clock::time_point first_output) {
  std::lock_guard<std::mutex> lock(mu_);
  StatsAt(session_start).ttfo.Record(Nanos(first_output - session_start));
}

void Recorder::RecordDecodeStep(Clock::time_point t0, Clock::time_point t1) {
  std::lock_guard<std::mutex> lock(mu_);
  StatsAt(t0).decode_step.Record(Nanos(t1 - t0));
}

void Recorder::RecordDraft(int64_t drafted, int64_t accepted) {
  std::lock_guard<std::mutex> lock(mu_);
  draft_tokens_ += drafted;
  accepted_tokens_ += accepted;
}

void Recorder::RecordSharedPrefill(Clock::time_point t0, Clock::time_point t1) {
  std::lock_guard<std::mutex> lock(mu_);
  ++shared_prefills_;
  shared_prefill_ns_ += static_cast<double>(Nanos(t1 - t0));
}

void Recorder::RecordUnitDone(Clock::time_point t, int sessions, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ok) return;
  BenchStats& stats = StatsAt(t);
  ++stats.rounds_completed;
  stats.sessions_completed += sessions;
}

void Recorder::RecordScheduleLag(Clock::time_point scheduled, Clock::time_point started) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t lag = std::max<int64_t>(0, Nanos(started - scheduled));
  if (scheduled >= warmup_end_) schedule_lag_.Record(lag);
  if (lag > 1000000) ++late_starts_;
}

ProgressSnapshot Recorder::Progress() {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  ProgressSnapshot p;
  p.elapsed_s = Seconds(now - start_);
  p.calls_since_last = progress_calls_;
  p.seconds_since_last = Seconds(now - last_progress_);
  p.key_p99_ns = progress_latency_.Percentile(99);
  p.errors = total_errors_;
  p.sessions_started = total_sessions_;
  p.behind_schedule = late_starts_;
  progress_calls_ = 0;
  progress_latency_ = LatencyHistogram();
  last_progress_ = now;
  return p;
}

}  // namespace gdn::client::bench
