#include "server/rpc/forward_stream_reactor.h"

#include <utility>

#include "server/rpc/forward_response.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/request_validation.h"

namespace gdn {

ForwardStreamReactor::ForwardStreamReactor(const ServiceContext* service,
                                           grpc::CallbackServerContext* context)
    : service_(service), context_(context) {
  std::lock_guard<std::mutex> lock(mu_);
  StartNextReadLocked();
}

void ForwardStreamReactor::StartNextReadLocked() {
  reading_ = std::make_unique<gdn::v1::ForwardRequest>();
  read_pending_ = true;
  StartRead(reading_.get());
}

void ForwardStreamReactor::OnReadDone(bool ok) {
  std::unique_ptr<ForwardCall> call = ValidateAndQueue(ok);
  // Outside the lock: SubmitForward may complete the call at once (when the
  // engine is stopping), and the completion takes the lock.
  if (call != nullptr) service_->engine->SubmitForward(std::move(call));
}

std::unique_ptr<ForwardCall> ForwardStreamReactor::ValidateAndQueue(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  read_pending_ = false;
  if (!ok) {  // the client half-closed, or the call ended
    reads_done_ = true;
    reading_.reset();
    MaybeFinishLocked();
    return nullptr;
  }
  const absl::Time start = absl::Now();
  std::unique_ptr<gdn::v1::ForwardRequest> request = std::move(reading_);
  slots_.push_back(std::make_unique<Slot>());
  Slot* slot = slots_.back().get();
  slot->response.set_request_id(request->request_id());

  absl::StatusOr<ValidatedForward> valid = ValidateForwardRequest(
      *request, service_->config.num_layers, service_->config.options);
  // Draining (--snapshot_dir): this message is answered UNAVAILABLE and not
  // applied; the stream stays open.
  if (valid.ok()) {
    if (absl::Status s = service_->EnterCall(); !s.ok()) valid = s;
  }
  std::unique_ptr<ForwardCall> call;
  if (!valid.ok()) {
    service_->RecordRequest("ForwardStream", valid.status(), start);
    SetErrorResponse(valid.status(), &slot->response);
    slot->complete = true;
  } else {
    call = std::make_unique<ForwardCall>();
    call->layer = valid->layer;
    call->sequences = std::move(valid->sequences);
    call->total_tokens = valid->total_tokens;
    call->request = request.get();
    call->owned_request = std::move(request);
    call->deadline = DeadlineOf(context_);
    grpc::CallbackServerContext* context = context_;
    call->is_cancelled = [context] { return context->IsCancelled(); };
    call->enqueued = start;
    call->method = "ForwardStream";
    const int64_t total_tokens = call->total_tokens;
    call->done = [this, slot, start, total_tokens](
                     absl::StatusOr<ForwardResult> result) {
      service_->LeaveCall();  // the engine is done with it
      service_->RecordRequest("ForwardStream", result.status(), start);
      std::lock_guard<std::mutex> lock(mu_);
      if (result.ok()) {
        SetForwardResponse(std::move(*result), total_tokens,
                           service_->config.options, &slot->response);
      } else {
        SetErrorResponse(result.status(), &slot->response);
      }
      slot->complete = true;
      --in_engine_;
      MaybeWriteLocked();
      MaybeFinishLocked();
    };
    ++in_engine_;
  }
  if (static_cast<int>(slots_.size()) < kMaxOutstanding) StartNextReadLocked();
  MaybeWriteLocked();
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
    Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                        "the stream's client went away"));
    return;
  }
  if (!reads_done_ || !slots_.empty()) return;
  finished_ = true;
  Finish(grpc::Status::OK);
}

void ForwardStreamReactor::OnDone() { delete this; }

}  // namespace gdn
