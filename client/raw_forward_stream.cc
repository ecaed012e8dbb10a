#include "client/raw_forward_stream.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/grpc_status.h"
#include "client/routing_key.h"

namespace gdn::client {

RawForwardStream::RawForwardStream(const std::shared_ptr<grpc::Channel>& channel,
                                   const RawCallOptions& options)
    : stub_(channel) {
  if (options.deadline != absl::InfiniteDuration()) {
    context_.set_deadline(std::chrono::system_clock::now() +
                          absl::ToChronoNanoseconds(options.deadline));
  }
  if (!options.route_key.empty()) {
    context_.AddMetadata(kRouteHeader, RouteHeaderValue(options.route_key));
  }
  call_ = stub_.PrepareCall(&context_, kForwardStreamMethod, &queue_);
}

absl::StatusOr<std::unique_ptr<RawForwardStream>> RawForwardStream::Open(
    const std::shared_ptr<grpc::Channel>& channel, const RawCallOptions& options) {
  std::unique_ptr<RawForwardStream> stream(new RawForwardStream(channel, options));
  if (stream->call_ == nullptr) {
    return absl::UnavailableError("ForwardStream: the channel could not prepare the call");
  }
  stream->call_->StartCall(stream.get());
  if (!stream->Await()) return stream->Ended();
  return stream;
}

RawForwardStream::~RawForwardStream() {
  if (call_ != nullptr && !finished_) {
    context_.TryCancel();
    grpc::Status ignored;
    call_->Finish(&ignored, this);
    Await();
  }
  queue_.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue_.Next(&tag, &ok)) {
  }
}

bool RawForwardStream::Await() {
  // One operation is outstanding at a time, so the next event is its own.
  void* tag = nullptr;
  bool ok = false;
  return queue_.Next(&tag, &ok) && ok;
}

absl::Status RawForwardStream::Ended() {
  ended_ = true;
  if (!finished_) {
    // A failed read (the server has finished) or write (the call is dead):
    // the final status is there or on its way.
    grpc::Status status;
    call_->Finish(&status, this);
    Await();
    finished_ = true;
    final_status_ = FromGrpcStatus(status);
  }
  in_flight_.clear();
  return final_status_.ok() ? absl::UnavailableError("the Forward stream ended") : final_status_;
}

absl::Status RawForwardStream::Send(const grpc::ByteBuffer& request, uint64_t request_id) {
  if (ended_) return Ended();
  call_->Write(request, this);
  if (!Await()) return Ended();
  in_flight_.push_back(request_id);
  return absl::OkStatus();
}

absl::StatusOr<RawForwardResponse> RawForwardStream::Receive() {
  if (ended_) return Ended();
  if (in_flight_.empty()) {
    return absl::FailedPreconditionError("ForwardStream: Receive with no request in flight");
  }
  grpc::ByteBuffer buffer;
  call_->Read(&buffer, this);
  if (!Await()) return Ended();
  const uint64_t expected = in_flight_.front();
  in_flight_.pop_front();
  absl::StatusOr<wire::WireMessage> message = wire::WireMessage::FromByteBuffer(buffer);
  if (!message.ok()) return absl::InternalError(message.status().message());
  absl::StatusOr<wire::ForwardResponseFields> fields = wire::ScanForwardResponse(*message);
  if (!fields.ok()) {
    return absl::InternalError(absl::StrCat("malformed response: ", fields.status().message()));
  }
  if (expected != 0 && fields->request_id != expected) {
    return absl::InternalError(absl::StrCat("response ", fields->request_id,
                                            " out of order, expected ", expected));
  }
  if (fields->error_code != 0) return FromGrpcCode(fields->error_code, fields->error_message);
  RawForwardResponse out;
  out.message = *std::move(message);
  out.fields = *std::move(fields);
  return out;
}

absl::Status RawForwardStream::Finish() {
  if (finish_called_) return absl::FailedPreconditionError("ForwardStream already finished");
  finish_called_ = true;
  if (!finished_) {
    if (!ended_) {
      call_->WritesDone(this);
      if (Await()) {
        grpc::ByteBuffer ignored;
        for (;;) {
          call_->Read(&ignored, this);
          if (!Await()) break;
        }
      }
    }
    grpc::Status status;
    call_->Finish(&status, this);
    Await();
    finished_ = true;
    final_status_ = FromGrpcStatus(status);
  }
  ended_ = true;
  in_flight_.clear();
  return final_status_;
}

}  // namespace gdn::client
