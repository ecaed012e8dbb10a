// The engine thread's loop, admission and session commands. Batches and
// kernel calls are in engine_batch.cc.
#include "server/engine/engine.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/engine/admission.h"
#include "server/engine/engine_internal.h"

namespace gdn {
namespace {

// How often parked calls are checked for cancellation while nothing else
// happens, and how often idle sessions are looked for.
constexpr absl::Duration kParkedPollInterval = absl::Milliseconds(10);
constexpr absl::Duration kMaxExpiryInterval = absl::Seconds(1);

std::string CacheNumbers(const StateCacheStats& s) {
  return absl::StrCat("device pages ", s.device.pages_used, "/",
                      s.device.pages_total, " used (", s.device.pages_pinned,
                      " pinned), host pages ", s.host.pages_used, "/",
                      s.host.pages_total, " used, page ", s.page_bytes,
                      " bytes, ", s.sessions, " sessions");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    const ServerConfig& config, std::unique_ptr<Backend> backend,
    ServerMetrics* metrics) {
  if (absl::Status s = ValidateServerConfig(config); !s.ok()) return s;
  if (backend == nullptr) return absl::InvalidArgumentError("no backend");
  GdnOptions kernel_options = config.options;
  kernel_options.gating = GatingMode::kDirect;
  if (absl::Status s = backend->Supports(kernel_options); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("backend ", backend->name(),
                                     " does not support ",
                                     DescribeOptions(config.options), ": ",
                                     s.message()));
  }
  StateCacheConfig cache_config;
  cache_config.num_layers = config.num_layers;
  cache_config.state_dtype = config.options.state_dtype;
  cache_config.layout =
      StatePageLayout::For(config.options.shape, config.options.state_dtype);
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
  DecodeRunnerConfig runner_config;
  runner_config.use_graphs = config.decode_graphs;
  // A decode batch has at most max_batch_tokens sequences (>= 1 token each).
  runner_config.max_seqs = static_cast<int32_t>(
      std::min<int64_t>(config.max_batch_tokens, int64_t{1} << 20));
  absl::StatusOr<std::unique_ptr<DecodeRunner>> runner =
      CreateDecodeRunner(*backend, kernel_options, runner_config);
  if (!runner.ok()) return runner.status();
  return std::unique_ptr<Engine>(new Engine(config, std::move(backend),
                                            std::move(*cache),
                                            std::move(*runner), metrics));
}

Engine::Engine(const ServerConfig& config, std::unique_ptr<Backend> backend,
               std::unique_ptr<StateCache> cache,
               std::unique_ptr<DecodeRunner> decode_runner,
               ServerMetrics* metrics)
    : config_(config),
      backend_(std::move(backend)),
      cache_(std::move(cache)),
      decode_runner_(std::move(decode_runner)),
      metrics_(metrics),
      decode_staging_(backend_.get()),
      prefill_staging_(backend_.get()) {
  // Fused gating is computed on the host while staging (engine_batch.cc), so
  // the kernels always run in direct mode.
  kernel_options_ = config_.options;
  kernel_options_.gating = GatingMode::kDirect;
  const StateCacheStats stats = cache_->Stats();
  info_.backend_name = std::string(backend_->name());
  info_.device_description = backend_->device_description();
  if (config_.diagnostic_no_compute) {
    // Loud everywhere the device is shown (GetServerInfo, start-up log).
    info_.device_description = absl::StrCat(
        "DIAGNOSTIC no-compute (no kernels, states untouched) on ",
        info_.device_description);
    std::cerr << "gdn-server: WARNING: DIAGNOSTIC no-compute mode: Forward "
                 "returns zeros and runs no kernel; states are not written. "
                 "For measuring the transport ceiling only.\n"
              << std::flush;
  }
  info_.layout = cache_->config().layout;
  info_.device_pages = stats.device.pages_total;
  info_.host_pages = stats.host.pages_total;
  UpdateGauges();
  thread_ = std::thread([this] { Loop(); });
}

Engine::~Engine() { Stop(); }

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  finisher_.Stop();  // every finished call answered before Stop returns
}

void Engine::SubmitForward(std::unique_ptr<ForwardCall> call) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_requested_) {
      incoming_calls_.push_back(std::move(call));
      cv_.notify_all();
      return;
    }
  }
  // Stopping: no engine thread will look at it (the only case where `done`
  // runs on the caller's thread).
  call->done(absl::UnavailableError("server is shutting down"));
}

void Engine::RunSessionCommand(std::string session, SessionCommand command) {
  std::lock_guard<std::mutex> lock(mu_);
  incoming_commands_.emplace_back(std::move(session), std::move(command));
  cv_.notify_all();
}

void Engine::SetSessionRestorer(SessionRestorer restorer) {
  std::lock_guard<std::mutex> lock(mu_);
  incoming_restorer_ = std::move(restorer);
  cv_.notify_all();
}

void Engine::FailPendingCalls(absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_pending_requested_ = true;
  pending_failure_ = std::move(status);
  cv_.notify_all();
}

void Engine::TakeIncoming(std::unique_lock<std::mutex>& lock) {
  if (incoming_restorer_) restorer_ = std::move(incoming_restorer_);
  incoming_restorer_ = nullptr;
  for (auto& call : incoming_calls_) waiting_.push_back(std::move(call));
  incoming_calls_.clear();
  for (auto& command : incoming_commands_) {
    if (!command.first.empty()) ++sessions_with_commands_[command.first];
    commands_.push_back(std::move(command));
  }
  incoming_commands_.clear();
}

void Engine::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    TakeIncoming(lock);
    const bool stopping = stop_requested_;
    const bool fail_pending = fail_pending_requested_;
    fail_pending_requested_ = false;
    const absl::Status pending_failure = pending_failure_;
    lock.unlock();

    absl::Time now = absl::Now();
    RunCommands();
    ExpireIdleSessions(now);
    if (fail_pending) FailPending(pending_failure);
    if (stopping) {
      while (!waiting_.empty()) {
        std::unique_ptr<ForwardCall> call = std::move(waiting_.front());
        waiting_.pop_front();
        FailWaiting(std::move(call),
                    absl::UnavailableError("server is shutting down"));
      }
    }
    AdmitWaiting(now);
    DropUnstartedCancelled(now);
    absl::Time fill_deadline = absl::InfiniteFuture();
    const bool run =
        !running_.empty() && (stopping || ReadyToRunNow(now, &fill_deadline));
    if (run) RunIteration();

    lock.lock();
    const bool idle = running_.empty() && commands_.empty() &&
                      waiting_.empty() && incoming_calls_.empty() &&
                      incoming_commands_.empty();
    if (stopping && idle) break;
    if (run || !incoming_calls_.empty() || !incoming_commands_.empty() ||
        stop_requested_ != stopping || fail_pending_requested_) {
      continue;
    }
    const absl::Time wake = std::min(NextWake(now), fill_deadline);
    const absl::Duration wait = wake - absl::Now();
    if (wait > absl::ZeroDuration()) {
      cv_.wait_for(lock, absl::ToChronoNanoseconds(wait));
    }
  }
}

absl::Time Engine::NextWake(absl::Time now) const {
  absl::Time wake = std::min(now + kMaxExpiryInterval, next_expiry_check_);
  if (!waiting_.empty()) {
    wake = std::min(wake, now + kParkedPollInterval);
  }
  for (const auto& running : running_) {
    if (!running->started) {
      wake = std::min(wake, std::max(now, running->call->deadline));
    }
  }
  // Deferred commands wait for running calls, which keep the loop busy.
  return wake;
}

void Engine::RunCommands() {
  const size_t count = commands_.size();
  for (size_t i = 0; i < count; ++i) {
    std::pair<std::string, SessionCommand> command =
        std::move(commands_.front());
    commands_.pop_front();
    const std::string& session = command.first;
    if (!session.empty() && busy_sessions_.contains(session)) {
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
  if (count > 0) UpdateGauges();
}

void Engine::ExpireIdleSessions(absl::Time now) {
  if (now < next_expiry_check_) return;
  next_expiry_check_ =
      now + std::min(kMaxExpiryInterval, config_.idle_timeout / 4);
  const std::vector<std::string> expired =
      cache_->ExpireIdle(now - config_.idle_timeout);
  if (!expired.empty()) UpdateGauges();
}

void Engine::FailWaiting(std::unique_ptr<ForwardCall> call,
                         absl::Status status) {
  finisher_.Post([call = std::move(call), status = std::move(status)]() mutable {
    call->done(std::move(status));
  });
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
  UpdateGauges();
}

absl::Status Engine::RestoreMissingSessions(const ForwardCall& call) {
  bool restored = false;
  for (const ForwardSequence& seq : call.sequences) {
    if (cache_->HasSession(seq.session)) continue;
    absl::Status s = restorer_(*cache_, seq.session);
    if (s.ok()) {
      restored = true;
    } else if (!absl::IsNotFound(s)) {
      if (restored) UpdateGauges();
      return s;
    }
  }
  if (restored) UpdateGauges();
  return absl::OkStatus();
}

void Engine::AdmitWaiting(absl::Time now) {
  auto key_state = [this](int32_t layer) {
    return [this, layer](const std::string& session) {
      KeyState state;
      state.session_exists = cache_->HasSession(session);
      if (!state.session_exists) return state;
      absl::StatusOr<int64_t> position = cache_->Position(session, layer);
      state.stored_position = position.ok() ? *position : 0;
      auto busy = busy_keys_.find(StateKey(session, layer));
      if (busy != busy_keys_.end()) {
        state.busy = true;
        for (const ForwardSequence& seq : busy->second->call->sequences) {
          if (seq.session == session) state.running_tokens = seq.num_tokens;
        }
      }
      return state;
    };
  };

  for (auto it = waiting_.begin(); it != waiting_.end();) {
    ForwardCall& call = **it;
    absl::Status failure;
    if (call.is_cancelled && call.is_cancelled()) {
      failure = absl::CancelledError("cancelled by the client");
    } else if (now >= call.deadline) {
      failure = absl::DeadlineExceededError(absl::StrCat(
          "deadline passed while waiting for earlier positions of layer ",
          call.layer, " (sequences[0]: session '", call.sequences[0].session,
          "' position ", call.sequences[0].position, ")"));
    }
    bool has_pending_command = false;
    for (const ForwardSequence& seq : call.sequences) {
      if (sessions_with_commands_.contains(seq.session)) {
        has_pending_command = true;
      }
    }
    if (failure.ok() && has_pending_command) {
      ++it;  // a session command queued before it runs first
      continue;
    }
    if (failure.ok() && restorer_) failure = RestoreMissingSessions(call);
    if (failure.ok()) {
      const AdmissionDecision decision =
          DecideAdmission(call.layer, call.sequences, key_state(call.layer));
      if (decision.action == AdmissionAction::kWait) {
        ++it;
        continue;
      }
      failure = decision.status;
    }
    std::unique_ptr<ForwardCall> owned = std::move(*it);
    it = waiting_.erase(it);
    std::vector<WriteLease> leases;
    if (failure.ok()) failure = AcquireLeases(*owned, &leases);
    if (!failure.ok()) {
      FailWaiting(std::move(owned), std::move(failure));
      continue;
    }
    auto running = std::make_unique<RunningCall>();
    running->leases = std::move(leases);
    running->done_tokens.assign(owned->sequences.size(), 0);
    const LayerShape& s = config_.options.shape;
    running->result.o.resize(static_cast<size_t>(owned->total_tokens) *
                             s.num_v_heads * s.head_dim_v *
                             DTypeSize(config_.options.input_dtype));
    running->call = std::move(owned);
    for (const ForwardSequence& seq : running->call->sequences) {
      busy_keys_[StateKey(seq.session, running->call->layer)] = running.get();
      ++busy_sessions_[seq.session];
    }
    running_.push_back(std::move(running));
  }
}

absl::Status Engine::AcquireLeases(const ForwardCall& call,
                                   std::vector<WriteLease>* leases) {
  for (const ForwardSequence& seq : call.sequences) {
    absl::StatusOr<WriteLease> lease =
        cache_->AcquireForWrite(seq.session, call.layer);
    if (!lease.ok()) {
      // All or nothing: give back what this call already took.
      for (const WriteLease& taken : *leases) cache_->Abort(taken);
      leases->clear();
      absl::Status status = lease.status();
      if (status.code() == absl::StatusCode::kResourceExhausted) {
        status = absl::ResourceExhaustedError(
            absl::StrCat("state cache full for session '", seq.session,
                         "' layer ", call.layer, ": ", status.message(), " [",
                         CacheNumbers(cache_->Stats()), "]"));
      }
      return status;
    }
    leases->push_back(*lease);
  }
  return absl::OkStatus();
}

void Engine::DropUnstartedCancelled(absl::Time now) {
  for (auto it = running_.begin(); it != running_.end();) {
    auto next = std::next(it);
    RunningCall& running = **it;
    if (!running.started) {
      const ForwardCall& call = *running.call;
      if (call.is_cancelled && call.is_cancelled()) {
        FinishCall(it, absl::CancelledError("cancelled by the client"));
      } else if (now >= call.deadline) {
        FinishCall(it, absl::DeadlineExceededError(
                           "deadline passed before the call could run"));
      }
    }
    it = next;
  }
}

void Engine::UpdateGauges() {
  if (metrics_ == nullptr) return;
  metrics_->UpdateStateCache(cache_->Stats());
  metrics_->UpdateDeviceMemory(backend_->MemoryInfo());
}

}  // namespace gdn
