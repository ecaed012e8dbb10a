// The engine: one thread that owns the Backend (its stream) and the
// StateCache, and runs every Forward call and session command.
//
// Threading: SubmitForward and RunSessionCommand are safe from any thread
// (the gRPC handlers); they only enqueue. Everything else - admission, lease
// acquisition, staging, kernel calls, commits and session commands - runs on
// the engine thread, so the cache and the backend are touched by one thread.
// Session commands run on the engine thread; ForwardCall::done runs on the
// engine's finisher thread (callback_runner.h) so that filling, serializing
// and writing responses overlaps the next batch. Neither may block.
//
// Ordering: per (session, layer), calls apply in `position` order, exactly
// once (admission.h). A call is all or nothing across its sequences: it
// takes every WriteLease before any of its work runs and commits them all
// after its last chunk; a failure aborts them all.
//
// One iteration: admit waiting calls; drop admitted calls that were
// cancelled or passed their deadline before running (abort their leases);
// plan (batch_planner.h: decodes first, prefills in chunks under
// max_batch_tokens, across clients and layers); stage, run one Decode and
// one Prefill call, copy o back, synchronize; complete finished calls.
// On the cuda backend (--decode_graphs, default on) the decode call is
// padded to a bucket of sequences and replayed as a CUDA graph; the staging
// copies are ordered around the graph on the same stream (DecodeRunner).
#ifndef GDN_SERVER_ENGINE_ENGINE_H_
#define GDN_SERVER_ENGINE_ENGINE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/backend.h"
#include "kernels/decode_runner.h"
#include "server/engine/batch_planner.h"
#include "server/engine/callback_runner.h"
#include "server/engine/forward_call.h"
#include "server/ops/metrics.h"
#include "server/ops/server_config.h"
#include "server/engine/staging_buffers.h"
#include "state_cache/state_cache.h"

namespace gdn {

// Facts fixed at start (safe to read from any thread).
struct EngineInfo {
  std::string backend_name;        // "cpu" or "cuda"
  std::string device_description;
  StatePageLayout layout;
  int64_t device_pages = 0;
  int64_t host_pages = 0;
};

class Engine {
 public:
  // Session commands run on the engine thread with the cache.
  using SessionCommand = std::function<void(StateCache& cache)>;

  // Creates the state cache on `backend` (budgets from `config`, 0 = the
  // backend's default) and starts the engine thread. `metrics` may be null.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const ServerConfig& config, std::unique_ptr<Backend> backend,
      ServerMetrics* metrics);
  ~Engine();  // Stop()

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Any thread. The call's `done` is called exactly once on the finisher
  // thread (forward_call.h).
  void SubmitForward(std::unique_ptr<ForwardCall> call);
  // Any thread. Runs `command` on the engine thread once `session` (empty:
  // none) has no running Forward call; Forward calls for that session that
  // arrive later wait until the command has run.
  void RunSessionCommand(std::string session, SessionCommand command);

  // Called on the engine thread when a Forward call names a session the
  // cache does not hold, before admission (--snapshot_dir restores it there):
  // OK when the cache now holds it; NotFound when there is nothing to restore
  // (the call then fails NOT_FOUND as usual); any other status fails the
  // call with it. Any thread; set it before the first call.
  using SessionRestorer =
      std::function<absl::Status(StateCache& cache, const std::string& id)>;
  void SetSessionRestorer(SessionRestorer restorer);

  // Any thread (a drain past its timeout): fails every call that has not
  // started running - parked, or admitted but before its first chunk - with
  // `status`; its leases are aborted, so it changes nothing. Calls already
  // running complete.
  void FailPendingCalls(absl::Status status);

  // Finishes running calls and queued commands, fails calls still waiting
  // with UNAVAILABLE, and joins the engine thread. Idempotent.
  void Stop();

  const EngineInfo& info() const { return info_; }

 private:
  struct RunningCall;
  struct PhaseBatch;

  Engine(const ServerConfig& config, std::unique_ptr<Backend> backend,
         std::unique_ptr<StateCache> cache,
         std::unique_ptr<DecodeRunner> decode_runner, ServerMetrics* metrics);

  // Engine thread.
  void Loop();
  void TakeIncoming(std::unique_lock<std::mutex>& lock);
  void RunCommands();
  void ExpireIdleSessions(absl::Time now);
  void AdmitWaiting(absl::Time now);
  absl::Status AcquireLeases(const ForwardCall& call,
                             std::vector<WriteLease>* leases);
  void DropUnstartedCancelled(absl::Time now);
  void RunIteration();
  absl::Status StagePhase(PhaseBatch& batch, StagingBuffers& staging);
  void ScatterOutputs(const PhaseBatch& batch, const StagingBuffers& staging);
  void FinishCall(std::list<std::unique_ptr<RunningCall>>::iterator it,
                  absl::Status status);
  void FailWaiting(std::unique_ptr<ForwardCall> call, absl::Status status);
  void FailPending(const absl::Status& status);
  absl::Status RestoreMissingSessions(const ForwardCall& call);
  bool ReadyToRunNow(absl::Time now, absl::Time* fill_deadline) const;
  absl::Time NextWake(absl::Time now) const;
  void UpdateGauges();

  const ServerConfig config_;
  GdnOptions kernel_options_;  // config_.options with gating forced to direct
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<StateCache> cache_;
  // Decode batches: direct, or padded to a bucket and replayed as a CUDA
  // graph (kernels/decode_runner.h; --decode_graphs). Declared after
  // backend_ (it holds a reference to it) and destroyed before it.
  std::unique_ptr<DecodeRunner> decode_runner_;
  ServerMetrics* metrics_;
  EngineInfo info_;
  StagingBuffers decode_staging_;
  StagingBuffers prefill_staging_;

  // Shared with submitting threads.
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<ForwardCall>> incoming_calls_;
  std::vector<std::pair<std::string, SessionCommand>> incoming_commands_;
  bool stop_requested_ = false;
  bool fail_pending_requested_ = false;
  absl::Status pending_failure_;
  SessionRestorer incoming_restorer_;
  std::thread thread_;
  // Runs finished calls' `done` off the engine thread (callback_runner.h).
  CallbackRunner finisher_;

  // Engine thread only.
  std::deque<std::unique_ptr<ForwardCall>> waiting_;    // arrival order
  std::list<std::unique_ptr<RunningCall>> running_;     // admission order
  absl::flat_hash_map<StateKey, const RunningCall*> busy_keys_;
  absl::flat_hash_map<std::string, int> busy_sessions_;  // running calls
  std::deque<std::pair<std::string, SessionCommand>> commands_;
  absl::flat_hash_map<std::string, int> sessions_with_commands_;
  absl::Time next_expiry_check_ = absl::InfinitePast();
  SessionRestorer restorer_;  // from incoming_restorer_
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_ENGINE_H_
