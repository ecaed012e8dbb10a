#include "client/raw_forward.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/grpc_status.h"
#include "client/routing_key.h"

namespace gdn::client {

RawCallOptions RawCallOptionsFor(const GdnClientOptions& options, std::string route_key) {
  RawCallOptions o;
  o.deadline = options.deadline;
  o.retry = options.retry;
  o.on_retry = options.on_retry;
  o.route_key = std::move(route_key);
  return o;
}

absl::StatusOr<RawForwardResponse> ForwardRaw(const std::shared_ptr<grpc::Channel>& channel,
                                              const grpc::ByteBuffer& request,
                                              const RawCallOptions& options) {
  RawForwardResponse out;
  const std::string route_header =
      options.route_key.empty() ? "" : RouteHeaderValue(options.route_key);
  absl::Status status = CallWithRetry(options.retry, options.on_retry, "Forward", [&](int) {
    grpc::ClientContext context;
    if (options.deadline != absl::InfiniteDuration()) {
      context.set_deadline(std::chrono::system_clock::now() +
                           absl::ToChronoNanoseconds(options.deadline));
    }
    if (!route_header.empty()) context.AddMetadata(kRouteHeader, route_header);
    grpc::ByteBuffer response;
    absl::Status s = FromGrpcStatus(
        RawUnaryCall(channel, kForwardMethod, &context, request, &response, options.api));
    if (!s.ok()) return s;
    absl::StatusOr<wire::WireMessage> message = wire::WireMessage::FromByteBuffer(response);
    if (!message.ok()) return absl::InternalError(message.status().message());
    absl::StatusOr<wire::ForwardResponseFields> fields = wire::ScanForwardResponse(*message);
    if (!fields.ok()) {
      return absl::InternalError(absl::StrCat("malformed response: ", fields.status().message()));
    }
    if (fields->error_code != 0) return FromGrpcCode(fields->error_code, fields->error_message);
    out.message = *std::move(message);
    out.fields = *std::move(fields);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return out;
}

}  // namespace gdn::client
