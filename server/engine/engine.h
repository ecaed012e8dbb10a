// The engine: a pipeline that owns its memory. It admits Forward calls in
// position order, plans batches across clients and layers, and keeps several
// batches in flight on lanes (one backend stream each) while it plans the
// next; it also runs every session command against the state cache.
//
//   request threads        engine thread                         device
//   ---------------        -------------                         ------
//   read + check + pack    admit (slot per (session, layer),
//   into an I/O block  ->  leases) -> plan a batch for a free  -> gather inputs,
//   (forward_call.h; the   lane -> one upload (inputs, metadata) kernel, o down
//   idle engine thread     ... next batch on another lane ...    into an I/O block
//   helps mid-sized ones)                                        (a decode kernel
//                                                                writes it there)
//   completion threads <-  lane done: commit, o runs per call <-
//   encode the response around o's bytes (no copy), finish the RPC
//
// Lanes: `decode_lanes` high-priority streams for decode batches (every
// sequence 1..kMaxDecodeTokens tokens, whole) and `prefill_lanes` for
// prefill chunks (under max_batch_tokens, aligned to 64): a long prefill
// never stalls a decode. A lane holds one batch at a time. Batching adapts to
// load: a call runs as soon as a lane of its kind is free; calls wait to be
// merged only while every such lane is busy (and, with max_queue_delay > 0,
// up to that long for a fuller batch while the device is busy).
//
// Ordering: per (session, layer), calls apply in `position` order, exactly
// once (admission.h). A call is all or nothing across its sequences: it
// takes every WriteLease at admission and commits them all after its last
// batch completes; a failure aborts them all. Chunks of one prefill in
// flight on two lanes are ordered on the device (the second lane waits for
// the first's event); batches wait for the state cache's page copies on the
// backend's own stream the same way.
//
// Threading: SubmitForward, RunSessionCommand, SetSessionRestorer,
// FailPendingCalls, Stop and arena() are safe from any thread (they only
// enqueue, or are immutable). Everything else - admission, slots, leases,
// the cache, the backend and its streams, planning, staging, completion of
// batches - runs on the thread that holds the engine: the engine thread, or,
// when that thread sleeps with nothing pending anywhere, the request thread
// that submits a lone call (it runs the call itself up to its completion, or
// until its batch is on a device lane, then lets go: no thread hop on an
// idle server). `done` runs on a completion thread, or on the thread holding
// the engine for a small response when the completion threads are idle.
#ifndef GDN_SERVER_ENGINE_ENGINE_H_
#define GDN_SERVER_ENGINE_ENGINE_H_

#include <atomic>
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
#include "server/engine/completion_pool.h"
#include "server/engine/forward_call.h"
#include "server/engine/io_arena.h"
#include "server/engine/slot_table.h"
#include "server/ops/metrics.h"
#include "server/ops/server_config.h"
#include "state_cache/state_cache.h"

namespace gdn {

// Facts fixed at start (safe to read from any thread).
struct EngineInfo {
  std::string backend_name;  // "cpu" or "cuda"
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
  // backend's default), the lanes and the I/O arena, and starts the engine
  // thread. `metrics` may be null.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const ServerConfig& config,
                                                        std::unique_ptr<Backend> backend,
                                                        ServerMetrics* metrics);
  ~Engine();  // Stop()

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Where request threads pack inputs (forward_call.h). Any thread.
  IoArena& arena() { return *arena_; }

  // Any thread. The call's `done` is called exactly once (forward_call.h).
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
  using SessionRestorer = std::function<absl::Status(StateCache& cache, const std::string& id)>;
  void SetSessionRestorer(SessionRestorer restorer);

  // Any thread (a drain past its timeout): fails every call that has not
  // started running - parked, or admitted but with no batch yet - with
  // `status`; its leases are aborted, so it changes nothing. Calls already
  // running complete.
  void FailPendingCalls(absl::Status status);

  // Finishes running calls and queued commands, fails calls still waiting
  // with UNAVAILABLE, and joins the engine thread. Idempotent.
  void Stop();

  const EngineInfo& info() const { return info_; }

  // Calls admitted and not yet finished, and batches on lanes, as of the
  // engine's last loop iteration (any thread; for tests and the status).
  int running_calls() const { return running_calls_.load(); }
  int batches_in_flight() const { return batches_in_flight_.load(); }

 private:
  struct RunningCall;
  struct BatchEntry;
  struct Lane;
  using RunningList = std::list<std::unique_ptr<RunningCall>>;

  Engine(const ServerConfig& config, std::unique_ptr<Backend> backend,
         std::unique_ptr<StateCache> cache, ServerMetrics* metrics);
  absl::Status CreateLanes();

  // Engine thread (or a submitting thread running a lone call inline, which
  // then holds the engine): the loop and what it runs (engine.cc).
  void Loop();
  // One pass over the engine's work; true when something moved.
  bool Step(absl::Time now, bool stopping);
  bool NothingPending() const;  // no call, command or batch anywhere
  bool AnyLaneDone();
  // Polls busy lanes for up to config_.lane_spin (a decode batch is done
  // sooner than a wake-up would take); true when one is done or work arrived.
  bool SpinForLanes(absl::Time until);
  // With nothing to do: polls has_incoming_ for up to config_.idle_poll (or
  // `until`); whether something came.
  bool PollForIncoming(absl::Time until);
  void TakeIncoming();
  void RunCommands();
  void ExpireIdleSessions(absl::Time now);
  // Admission (engine_admission.cc).
  void AdmitWaiting(absl::Time now);
  absl::Status AcceptDrafts(const ForwardCall& call);
  absl::Status AcquireLeases(const ForwardCall& call, std::vector<WriteLease>* leases);
  absl::Status RestoreMissingSessions(const ForwardCall& call);
  void DropUnstartedCancelled(absl::Time now);
  void FailWaiting(std::unique_ptr<ForwardCall> call, absl::Status status);
  void FailPending(const absl::Status& status);
  void FinishCall(RunningList::iterator it, absl::Status status);
  void Deliver(std::unique_ptr<ForwardCall> call, absl::StatusOr<ForwardResult> result);
  absl::Time NextWake(absl::Time now) const;
  void MaybeRefreshGauges(absl::Time now, bool force);

  // Engine thread: batches on lanes (engine_batches.cc).
  bool LaunchBatches(absl::Time now, bool stopping);
  bool PlanBatch(bool decode, std::vector<BatchEntry>* entries);
  absl::Status StageAndLaunch(Lane& lane);
  absl::Status CopyOToRegions(Lane& lane, const char* device_o, size_t v_row);
  bool CompleteLanes();
  void CompleteLane(Lane& lane, absl::Status status);
  bool AnyLaneBusy() const;

  const ServerConfig config_;
  GdnOptions kernel_options_;  // config_.options with gating forced to direct
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<StateCache> cache_;
  std::unique_ptr<IoArena> arena_;
  std::vector<std::unique_ptr<Lane>> lanes_;  // decode lanes first
  ServerMetrics* metrics_;
  EngineInfo info_;
  // --diagnostic_no_compute: o of every call, never written (zero pages).
  std::shared_ptr<const char> zeros_;

  // Shared with submitting threads.
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<ForwardCall>> incoming_calls_;
  std::vector<std::pair<std::string, SessionCommand>> incoming_commands_;
  bool stop_requested_ = false;
  bool fail_pending_requested_ = false;
  absl::Status pending_failure_;
  SessionRestorer incoming_restorer_;
  std::atomic<bool> has_incoming_{false};  // lets the engine poll without the lock
  // Who holds the engine's state: the engine thread while awake_; a
  // submitting thread while inline_running_ (only when the engine thread
  // sleeps with idle_: nothing pending anywhere).
  bool awake_ = true;
  bool idle_ = false;
  bool inline_running_ = false;
  std::atomic<int> running_calls_{0};
  std::atomic<int> batches_in_flight_{0};
  std::thread thread_;
  CompletionPool completions_;

  // Engine thread only.
  std::deque<std::unique_ptr<ForwardCall>> waiting_;  // arrival order
  RunningList running_;                               // admission order
  SlotTable<RunningCall> slots_;
  std::deque<std::pair<std::string, SessionCommand>> commands_;
  absl::flat_hash_map<std::string, int> sessions_with_commands_;
  absl::Time next_expiry_check_ = absl::InfinitePast();
  absl::Time next_gauges_ = absl::InfinitePast();
  SessionRestorer restorer_;  // from incoming_restorer_
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_ENGINE_H_
