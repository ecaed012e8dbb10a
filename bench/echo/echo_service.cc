#include "bench/echo/echo_service.h"

#include "absl/strings/str_cat.h"
#include "bench/echo/echo_stream_reactor.h"
#include "bench/echo/proto_echo_response.h"
#include "bench/echo/raw_echo_response.h"
#include "proto/forward_wire.h"

namespace gdn::echo {

std::string NextEchoSessionId() {
  static std::atomic<uint64_t> next{1};
  return absl::StrCat("echo-", next.fetch_add(1));
}

ProtoEchoService::ProtoEchoService(const EchoOptions& options) : EchoSessionMethods(options) {}

grpc::ServerUnaryReactor* ProtoEchoService::Forward(grpc::CallbackServerContext* context,
                                                    const v1::ForwardRequest* request,
                                                    v1::ForwardResponse* response) {
  ProtoEchoResponse(*request, info().config(), response);
  return Done(context);
}

grpc::ServerBidiReactor<v1::ForwardRequest, v1::ForwardResponse>* ProtoEchoService::ForwardStream(
    grpc::CallbackServerContext*) {
  const v1::LayerConfig config = info().config();
  return new EchoStreamReactor<v1::ForwardRequest, v1::ForwardResponse>(
      [config](const v1::ForwardRequest& request, v1::ForwardResponse* response) {
        ProtoEchoResponse(request, config, response);
      });
}

RawEchoService::RawEchoService(const EchoOptions& options) : EchoSessionMethods(options) {
  PrepareZeroBuffer(static_cast<size_t>(options.transport.max_message_bytes));
}

grpc::ServerUnaryReactor* RawEchoService::Forward(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) {
  absl::Status answered = RawEchoResponse(*request, info().config(), response);
  if (!answered.ok()) {
    return Done(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                      std::string(answered.message())));
  }
  return Done(context);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* RawEchoService::ForwardStream(
    grpc::CallbackServerContext*) {
  const v1::LayerConfig config = info().config();
  return new EchoStreamReactor<grpc::ByteBuffer, grpc::ByteBuffer>(
      [config](const grpc::ByteBuffer& request, grpc::ByteBuffer* response) {
        absl::Status answered = RawEchoResponse(request, config, response);
        if (!answered.ok()) {
          grpc::ByteBuffer error = RawErrorResponse(answered, 0);
          response->Swap(&error);
        }
      });
}

std::unique_ptr<grpc::Service> MakeEchoService(const EchoOptions& options) {
  if (options.mode == EchoMode::kRaw) return std::make_unique<RawEchoService>(options);
  return std::make_unique<ProtoEchoService>(options);
}

}  // namespace gdn::echo
