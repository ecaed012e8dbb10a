#include "client/raw_unary_call.h"

#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"

namespace gdn::client {
namespace {

grpc::Status CallOnQueue(grpc::GenericStub& stub, const std::string& method,
                         grpc::ClientContext* context, const grpc::ByteBuffer& request,
                         grpc::ByteBuffer* response) {
  grpc::CompletionQueue queue;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(context, method, request, &queue);
  call->StartCall();
  grpc::Status status;
  call->Finish(response, &status, /*tag=*/nullptr);
  void* tag = nullptr;
  bool ok = false;
  // The only event is Finish's; its status covers every failure.
  queue.Next(&tag, &ok);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

grpc::Status CallWithCallback(grpc::GenericStub& stub, const std::string& method,
                              grpc::ClientContext* context, const grpc::ByteBuffer& request,
                              grpc::ByteBuffer* response) {
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(context, method, grpc::StubOptions(), &request, response,
                 [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = std::move(s);
                   done = true;
                   done_cv.notify_one();
                 });
  std::unique_lock<std::mutex> lock(mu);
  done_cv.wait(lock, [&] { return done; });
  return status;
}

}  // namespace

absl::StatusOr<RawCallApi> ParseRawCallApi(absl::string_view name) {
  if (name == "cq") return RawCallApi::kCompletionQueue;
  if (name == "callback") return RawCallApi::kCallback;
  return absl::InvalidArgumentError(absl::StrCat("call api must be cq or callback, got '", name, "'"));
}

grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                          grpc::ClientContext* context, const grpc::ByteBuffer& request,
                          grpc::ByteBuffer* response, RawCallApi api) {
  grpc::GenericStub stub(channel);
  if (api == RawCallApi::kCallback) return CallWithCallback(stub, method, context, request, response);
  return CallOnQueue(stub, method, context, request, response);
}

}  // namespace gdn::client
