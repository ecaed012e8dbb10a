#include "server/rpc/forward_stream_reactor.h"

#include <utility>

#include "server/auth/scoped_forward_call.h"
#include "server/rpc/forward_request_reader.h"
#include "server/rpc/forward_response.h"
#include "server/rpc/grpc_status.h"

namespace gdn {

ForwardStreamReactor::ForwardStreamReactor(const ServiceContext* service,
                                           grpc::CallbackServerContext* context)
    : service_(service), context_(context) {
  absl::StatusOr<TenantScope> scope = service_->ScopeOf(*context);
  if (!scope.ok()) {
    service_->RecordRequest("ForwardStream", scope.status(), absl::Now());
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    Finish(ToGrpcStatus(scope.status()));
    return;
  }
  scope_ = std::move(*scope);
  std::lock_guard<std::mutex> lock(mu_);
  StartNextReadLocked();
}

void ForwardStreamReactor::StartNextReadLocked() {
  reading_.Clear();
  read_pending_ = true;
  StartRead(&reading_);
}

void ForwardStreamReactor::OnReadDone(bool ok) {
  if (!ok) {  // the client half-closed, or the call ended
    std::lock_guard<std::mutex> lock(mu_);
    read_pending_ = false;
    reads_done_ = true;
    reading_.Clear();
    MaybeFinishLocked();
    return;
  }
  // Packing runs outside the lock (it reads the whole request once);
  // SubmitForward too, since it may complete the call at once (when the
  // engine is stopping) and the completion takes the lock. The next read
  // starts only after this request was submitted: stream order is the
  // engine's order.
  std::unique_ptr<ForwardCall> call = TakeRequest();
  if (call != nullptr) service_->engine->SubmitForward(std::move(call));
  std::lock_guard<std::mutex> lock(mu_);
  read_pending_ = false;
  if (!write_failed_ && static_cast<int>(slots_.size()) < kMaxOutstanding) {
    StartNextReadLocked();
  }
  MaybeWriteLocked();
  MaybeFinishLocked();
}

std::unique_ptr<ForwardCall> ForwardStreamReactor::TakeRequest() {
  const absl::Time start = absl::Now();
  // Only this thread touches reading_ until the next StartRead.
  uint64_t request_id = 0;
  const RegionAccess access = service_->RegionAccessFor(scope_);
  absl::StatusOr<std::unique_ptr<ForwardCall>> read =
      ReadForwardRequest(reading_, service_->config.num_layers, service_->config.options,
                         service_->engine->arena(), &request_id, &access);
  reading_.Clear();
  if (read.ok()) {
    if (absl::Status s = ScopeForwardCall(scope_, service_->tenant_metrics, read->get());
        !s.ok()) {
      read = s;
    }
  }
  // Draining (--snapshot_dir): this message is answered UNAVAILABLE and not
  // applied; the stream stays open.
  if (read.ok()) {
    if (absl::Status s = service_->EnterCall(); !s.ok()) read = s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  slots_.push_back(std::make_unique<Slot>());
  Slot* slot = slots_.back().get();
  if (!read.ok()) {
    service_->RecordRequest("ForwardStream", read.status(), start, scope_);
    slot->response = EncodeForwardError(scope_.Outward(read.status()), request_id);
    slot->complete = true;
    return nullptr;
  }
  std::unique_ptr<ForwardCall> call = std::move(*read);
  call->deadline = DeadlineOf(context_);
  grpc::CallbackServerContext* context = context_;
  call->is_cancelled = [context] { return context->IsCancelled(); };
  call->enqueued = start;
  call->method = "ForwardStream";
  const int64_t total_tokens = call->total_tokens;
  call->done = [this, slot, start, total_tokens,
                request_id](absl::StatusOr<ForwardResult> result) {
    service_->LeaveCall();  // the engine is done with it
    service_->RecordRequest("ForwardStream", result.status(), start, scope_);
    grpc::ByteBuffer encoded =
        result.ok() ? EncodeForwardResult(std::move(*result), total_tokens,
                                          service_->config.options, request_id)
                    : EncodeForwardError(scope_.Outward(result.status()), request_id);
    std::lock_guard<std::mutex> lock(mu_);
    slot->response.Swap(&encoded);
    slot->complete = true;
    --in_engine_;
    MaybeWriteLocked();
    MaybeFinishLocked();
  };
  ++in_engine_;
  return call;
}

void ForwardStreamReactor::MaybeWriteLocked() {
  if (writing_ || write_failed_ || finished_) return;
  if (slots_.empty() || !slots_.front()->complete) return;
  writing_ = true;
  StartWrite(&slots_.front()->response);
}

void ForwardStreamReactor::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  writing_ = false;
  slots_.pop_front();
  if (!ok) write_failed_ = true;  // the client is gone; drain the engine
  if (!read_pending_ && !reads_done_ && !write_failed_ &&
      static_cast<int>(slots_.size()) < kMaxOutstanding) {
    StartNextReadLocked();
  }
  MaybeWriteLocked();
  MaybeFinishLocked();
}

void ForwardStreamReactor::MaybeFinishLocked() {
  if (finished_ || writing_ || read_pending_ || in_engine_ > 0) return;
  if (write_failed_) {
    finished_ = true;
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the stream's client went away"));
    return;
  }
  if (!reads_done_ || !slots_.empty()) return;
  finished_ = true;
  Finish(grpc::Status::OK);
}

void ForwardStreamReactor::OnDone() { delete this; }

}  // namespace gdn
