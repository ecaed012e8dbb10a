// The engine thread's loop, session commands and completion of calls.
// Admission is in engine_admission.cc, batches on lanes in
// engine_batches.cc.
#include "server/engine/engine.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "server/engine/engine_internal.h"

namespace gdn {
namespace {

// How often parked calls are checked for cancellation while nothing else
// happens, how often idle sessions are looked for, and how often the cache
// and memory gauges are refreshed.
constexpr absl::Duration kParkedPollInterval = absl::Milliseconds(10);
constexpr absl::Duration kMaxExpiryInterval = absl::Seconds(1);
constexpr absl::Duration kGaugeInterval = absl::Seconds(1);
// While a batch is in flight the engine polls for it this long before it
// sleeps (a decode batch is done in tens of microseconds: a wake-up would
// cost more); after that the lane's completion notification wakes it.
// Responses up to this many bytes are finished on the engine thread itself
// when the completion threads are idle: encoding one is a few header bytes
// (o is sent in place), and the hop to another thread would cost more.
constexpr size_t kInlineCompletionBytes = 256 << 10;

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const ServerConfig& config,
                                                       std::unique_ptr<Backend> backend,
                                                       ServerMetrics* metrics) {
  if (absl::Status s = ValidateServerConfig(config); !s.ok()) return s;
  if (backend == nullptr) return absl::InvalidArgumentError("no backend");
  GdnOptions kernel_options = config.options;
  kernel_options.gating = GatingMode::kDirect;
  if (absl::Status s = backend->Supports(kernel_options); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("backend ", backend->name(), " does not support ",
                                               DescribeOptions(config.options), ": ",
                                               s.message()));
  }
  StateCacheConfig cache_config;
  cache_config.num_layers = config.num_layers;
  cache_config.state_dtype = config.options.state_dtype;
  cache_config.layout = StatePageLayout::For(config.options.shape, config.options.state_dtype);
  cache_config.device_budget_bytes =
      config.device_state_budget_bytes != 0
          ? config.device_state_budget_bytes
          : DefaultDeviceBudget(backend->name(), backend->MemoryInfo());
  cache_config.host_budget_bytes = config.host_state_budget_bytes != 0
                                       ? config.host_state_budget_bytes
                                       : DefaultHostBudget();
  cache_config.evict_lru_sessions_when_full = config.evict_lru_when_full;
  absl::StatusOr<std::unique_ptr<StateCache>> cache =
      StateCache::Create(cache_config, backend.get());
  if (!cache.ok()) return cache.status();
  std::unique_ptr<Engine> engine(
      new Engine(config, std::move(backend), std::move(*cache), metrics));
  if (absl::Status s = engine->CreateLanes(); !s.ok()) return s;
  engine->thread_ = std::thread([e = engine.get()] { e->Loop(); });
  return engine;
}

Engine::Engine(const ServerConfig& config, std::unique_ptr<Backend> backend,
               std::unique_ptr<StateCache> cache, ServerMetrics* metrics)
    : config_(config),
      backend_(std::move(backend)),
      cache_(std::move(cache)),
      arena_(std::make_unique<IoArena>(backend_.get(), config.io_buffer_bytes,
                                        config.pack_threads, config.pack_share_bytes,
                                        config.pack_poll_share_bytes)),
      metrics_(metrics),
      completions_(config.completion_threads) {
  // Fused gating is folded into g and beta when requests are packed
  // (server/rpc/forward_request_reader.h), so the kernels run in direct mode.
  kernel_options_ = config_.options;
  kernel_options_.gating = GatingMode::kDirect;
  const StateCacheStats stats = cache_->Stats();
  info_.backend_name = std::string(backend_->name());
  info_.device_description = backend_->device_description();
  if (config_.diagnostic_no_compute) {
    // Loud everywhere the device is shown (GetServerInfo, start-up log).
    info_.device_description = absl::StrCat(
        "DIAGNOSTIC no-compute (no kernels, states untouched) on ", info_.device_description);
    std::cerr << "gdn-server: WARNING: DIAGNOSTIC no-compute mode: Forward returns zeros and "
                 "runs no kernel; states are not written. For measuring the transport ceiling "
                 "only.\n"
              << std::flush;
    // calloc's untouched pages read as zeros without being backed.
    zeros_.reset(static_cast<const char*>(std::calloc(config_.max_message_bytes, 1)),
                 [](const char* p) { std::free(const_cast<char*>(p)); });
  }
  info_.layout = cache_->config().layout;
  info_.device_pages = stats.device.pages_total;
  info_.host_pages = stats.host.pages_total;
  MaybeRefreshGauges(absl::Now(), /*force=*/true);
}

absl::Status Engine::CreateLanes() {
  const int lanes = config_.decode_lanes + config_.prefill_lanes;
  for (int i = 0; i < lanes; ++i) {
    const bool decode = i < config_.decode_lanes;
    auto lane = std::make_unique<Lane>(backend_.get(), i, decode);
    absl::StatusOr<std::unique_ptr<BackendStream>> stream = backend_->CreateStream(decode);
    if (!stream.ok()) return stream.status();
    lane->stream = std::move(*stream);
    // A finished batch wakes the engine if it sleeps (engine thread or a
    // backend thread: only the lock and the condition variable).
    lane->stream->SetOnDone([this] {
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    });
    lanes_.push_back(std::move(lane));
  }
  return absl::OkStatus();
}

Engine::~Engine() {
  Stop();
  // Streams go first, while the lock their completion callbacks take lives.
  for (const auto& lane : lanes_) (void)lane->stream->Synchronize();
  lanes_.clear();
}

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
    has_incoming_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  completions_.Stop();  // every finished call answered before Stop returns
}

void Engine::SubmitForward(std::unique_ptr<ForwardCall> call) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_requested_) {
    lock.unlock();
    // Stopping: no engine thread will look at it (the only case where `done`
    // runs on the caller's thread with an error).
    call->done(absl::UnavailableError("server is shutting down"));
    return;
  }
  if (awake_ || !idle_ || inline_running_ || has_incoming_) {
    incoming_calls_.push_back(std::move(call));
    has_incoming_ = true;
    cv_.notify_all();
    return;
  }
  // A lone call on an idle engine runs right here: this thread holds the
  // engine (the engine thread waits for it to let go) until the call is done
  // or its batch is on a device lane, saving a thread hop and a wake-up.
  inline_running_ = true;
  idle_ = false;
  lock.unlock();
  waiting_.push_back(std::move(call));
  // Until nothing moves. A batch left on the device is waited for here too,
  // for up to config_.lane_spin (a decode batch is back sooner than the engine
  // thread would wake); a longer one, or other calls arriving, go to the
  // engine thread.
  while (true) {
    const bool progressed = Step(absl::Now(), /*stopping=*/false);
    if (AnyLaneBusy() ? !SpinForLanes(absl::Now() + config_.lane_spin) || has_incoming_
                      : !progressed) {
      break;
    }
  }
  lock.lock();
  inline_running_ = false;
  idle_ = NothingPending();
  // The engine thread takes over what is left: a batch in flight to watch,
  // or calls that arrived meanwhile.
  if (!idle_ || has_incoming_) cv_.notify_all();
}

void Engine::RunSessionCommand(std::string session, SessionCommand command) {
  std::lock_guard<std::mutex> lock(mu_);
  incoming_commands_.emplace_back(std::move(session), std::move(command));
  has_incoming_ = true;
  cv_.notify_all();
}

void Engine::SetSessionRestorer(SessionRestorer restorer) {
  std::lock_guard<std::mutex> lock(mu_);
  incoming_restorer_ = std::move(restorer);
  has_incoming_ = true;
  cv_.notify_all();
}

void Engine::FailPendingCalls(absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_pending_requested_ = true;
  pending_failure_ = std::move(status);
  has_incoming_ = true;
  cv_.notify_all();
}

void Engine::TakeIncoming() {
  if (incoming_restorer_) restorer_ = std::move(incoming_restorer_);
  incoming_restorer_ = nullptr;
  for (auto& call : incoming_calls_) waiting_.push_back(std::move(call));
  incoming_calls_.clear();
  for (auto& command : incoming_commands_) {
    if (!command.first.empty()) ++sessions_with_commands_[command.first];
    commands_.push_back(std::move(command));
  }
  incoming_commands_.clear();
  has_incoming_ = false;
}

void Engine::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return !inline_running_; });  // the engine is this thread's again
    awake_ = true;
    idle_ = false;
    TakeIncoming();
    const bool stopping = stop_requested_;
    const bool fail_pending = fail_pending_requested_;
    fail_pending_requested_ = false;
    const absl::Status pending_failure = pending_failure_;
    lock.unlock();

    const absl::Time now = absl::Now();
    if (fail_pending) FailPending(pending_failure);
    const bool progressed = Step(now, stopping);

    lock.lock();
    const bool idle = NothingPending() && incoming_calls_.empty() && incoming_commands_.empty();
    if (stopping && idle) break;
    if (progressed || has_incoming_ || stop_requested_ != stopping) continue;
    lock.unlock();
    if (SpinForLanes(NextWake(now))) {
      lock.lock();
      continue;
    }
    // Idle: poll for the next submission for up to idle_poll before sleeping
    // (awake_ stays set: submitters hand their calls to this thread, which
    // runs them on a core that is still warm, instead of running them on a
    // request thread just back from the kernel).
    if (PollForIncoming(NextWake(now))) {
      lock.lock();
      continue;
    }
    lock.lock();
    // Sleep. A lane's completion (SetOnDone) or a submission notifies; the
    // lanes are looked at again under the lock so a completion between the
    // spin and the wait is not missed. While this thread sleeps with nothing
    // pending, a submitting thread may run a lone call itself.
    if (AnyLaneDone() || has_incoming_) continue;
    idle_ = NothingPending();
    awake_ = false;
    const absl::Duration wait = NextWake(now) - absl::Now();
    if (wait > absl::ZeroDuration()) cv_.wait_for(lock, absl::ToChronoNanoseconds(wait));
  }
}

bool Engine::Step(absl::Time now, bool stopping) {
  RunCommands();
  ExpireIdleSessions(now);
  if (stopping) {
    while (!waiting_.empty()) {
      std::unique_ptr<ForwardCall> call = std::move(waiting_.front());
      waiting_.pop_front();
      FailWaiting(std::move(call), absl::UnavailableError("server is shutting down"));
    }
  }
  AdmitWaiting(now);
  DropUnstartedCancelled(now);
  bool progressed = CompleteLanes();
  progressed |= LaunchBatches(now, stopping);
  MaybeRefreshGauges(now, /*force=*/false);
  running_calls_ = static_cast<int>(running_.size());
  int in_flight = 0;
  for (const auto& lane : lanes_) in_flight += lane->busy;
  batches_in_flight_ = in_flight;
  return progressed;
}

bool Engine::NothingPending() const {
  return running_.empty() && commands_.empty() && waiting_.empty() && !AnyLaneBusy();
}

bool Engine::AnyLaneDone() {
  for (const auto& lane : lanes_) {
    if (!lane->busy) continue;
    absl::StatusOr<bool> done = lane->stream->Query();
    if (!done.ok() || *done) return true;
  }
  return false;
}

bool Engine::SpinForLanes(absl::Time until) {
  if (!AnyLaneBusy()) return false;
  const absl::Time spin_until = std::min(until, absl::Now() + config_.lane_spin);
  while (absl::Now() < spin_until) {
    if (has_incoming_ || AnyLaneDone()) return true;
    std::this_thread::yield();
  }
  return false;
}

bool Engine::PollForIncoming(absl::Time until) {
  if (config_.idle_poll <= absl::ZeroDuration() || AnyLaneBusy()) return false;
  const absl::Time poll_until = std::min(until, absl::Now() + config_.idle_poll);
  // Meanwhile it helps request threads pack mid-sized requests (IoArena's
  // poll_share_from_bytes): the call it will run next is usually one of them.
  WorkSharingPool::Polling polling(arena_->copy_workers());
  while (absl::Now() < poll_until) {
    if (has_incoming_) return true;
    if (!arena_->copy_workers().Help()) std::this_thread::yield();
  }
  return false;
}

absl::Time Engine::NextWake(absl::Time now) const {
  absl::Time wake = std::min(now + kMaxExpiryInterval, next_expiry_check_);
  wake = std::min(wake, next_gauges_);
  if (!waiting_.empty()) wake = std::min(wake, now + kParkedPollInterval);
  for (const auto& running : running_) {
    if (!running->started) {
      wake = std::min(wake, std::max(now, running->call->deadline));
      // A batch held back by max_queue_delay launches at its deadline (one
      // that waits for a free lane is woken by the lane instead).
      const absl::Time held_until = running->call->enqueued + config_.max_queue_delay;
      if (held_until > now) wake = std::min(wake, held_until);
    }
  }
  return wake;
}

void Engine::RunCommands() {
  const size_t count = commands_.size();
  if (count == 0) return;
  // Sessions with a running call (commands wait for them): looked up only
  // when a command waits, so a Forward call pays nothing per sequence.
  absl::flat_hash_set<absl::string_view> busy_sessions;
  for (const auto& running : running_) {
    for (const ForwardSequence& seq : running->call->sequences) busy_sessions.insert(seq.session);
  }
  for (size_t i = 0; i < count; ++i) {
    std::pair<std::string, SessionCommand> command = std::move(commands_.front());
    commands_.pop_front();
    const std::string& session = command.first;
    if (!session.empty() && busy_sessions.contains(session)) {
      commands_.push_back(std::move(command));  // after its running calls
      continue;
    }
    command.second(*cache_);
    if (!session.empty()) {
      auto it = sessions_with_commands_.find(session);
      if (it != sessions_with_commands_.end() && --it->second == 0) {
        sessions_with_commands_.erase(it);
      }
    }
  }
  MaybeRefreshGauges(absl::Now(), /*force=*/true);
}

void Engine::ExpireIdleSessions(absl::Time now) {
  if (now < next_expiry_check_) return;
  next_expiry_check_ = now + std::min(kMaxExpiryInterval, config_.idle_timeout / 4);
  cache_->ExpireIdle(now - config_.idle_timeout);
}

void Engine::FailWaiting(std::unique_ptr<ForwardCall> call, absl::Status status) {
  Deliver(std::move(call), std::move(status));
}

void Engine::FailPending(const absl::Status& status) {
  while (!waiting_.empty()) {
    std::unique_ptr<ForwardCall> call = std::move(waiting_.front());
    waiting_.pop_front();
    FailWaiting(std::move(call), status);
  }
  for (auto it = running_.begin(); it != running_.end();) {
    auto next = std::next(it);
    if (!(*it)->started) FinishCall(it, status);  // aborts its leases
    it = next;
  }
}

void Engine::FinishCall(RunningList::iterator it, absl::Status status) {
  std::unique_ptr<RunningCall> running = std::move(*it);
  running_.erase(it);
  ForwardCall& call = *running->call;
  ForwardResult result;
  if (status.ok()) result.positions.reserve(call.sequences.size());
  for (size_t i = 0; i < call.sequences.size(); ++i) {
    const ForwardSequence& seq = call.sequences[i];
    if (status.ok()) {
      const int64_t position = seq.position + seq.num_tokens;
      cache_->Commit(running->leases[i], position);
      result.positions.push_back(position);
    } else {
      cache_->Abort(running->leases[i]);
    }
    slots_.Release(running->slots[i]);
  }
  if (!status.ok()) {
    Deliver(std::move(running->call), std::move(status));
    return;
  }
  // o in the call's row order: its batches' runs, sorted by first row, and
  // runs that continue each other in one block merged (one slice each).
  std::sort(running->o.begin(), running->o.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [row, run] : running->o) {
    if (!result.o.empty()) {
      wire::BytesRef& last = result.o.back();
      if (last.owner == run.owner &&
          static_cast<const char*>(last.data) + last.size == static_cast<const char*>(run.data)) {
        last.size += run.size;
        continue;
      }
    }
    result.o.push_back(std::move(run));
  }
  Deliver(std::move(running->call), std::move(result));
}

void Engine::Deliver(std::unique_ptr<ForwardCall> call, absl::StatusOr<ForwardResult> result) {
  size_t bytes = 0;
  if (result.ok()) {
    for (const wire::BytesRef& run : result->o) bytes += run.size;
  }
  if (bytes <= kInlineCompletionBytes && !has_incoming_ && completions_.idle()) {
    call->done(std::move(result));
    return;
  }
  completions_.Post([call = std::move(call), result = std::move(result)]() mutable {
    call->done(std::move(result));
  });
}

void Engine::MaybeRefreshGauges(absl::Time now, bool force) {
  if (!force && now < next_gauges_) return;
  // Advanced with or without metrics: NextWake counts it, and a past time
  // there would keep the engine thread from ever sleeping.
  next_gauges_ = now + kGaugeInterval;
  if (metrics_ == nullptr) return;
  metrics_->UpdateStateCache(cache_->Stats());
  metrics_->UpdateDeviceMemory(backend_->MemoryInfo());
  const IoArenaStats io = arena_->Stats();
  metrics_->UpdateIoBuffers(io.bytes_in_use, io.bytes_allocated, io.refusals);
}

}  // namespace gdn
