// OpenChannel and CloseChannel, and what a Forward call through a channel
// does: the same as the Forward RPC (read, check and pack the request, hand
// it to the engine, encode the result around o's bytes), with the reply
// written into the channel's slot instead of a gRPC response.
#include "absl/strings/str_cat.h"
#include "server/auth/scoped_forward_call.h"
#include "server/rpc/forward_response.h"
#include "server/rpc/gdn_service.h"
#include "server/rpc/grpc_status.h"

namespace gdn {
namespace {

constexpr char kMethod[] = "ChannelForward";

absl::Status NoChannels() {
  return absl::FailedPreconditionError("this server does not open channels");
}

// An upper bound of the encoded ForwardResponse without an output region:
// o's bytes, its dtype and shape, the positions (a varint each), the
// request id, and the tags and lengths around them.
uint64_t ResponseBound(const ForwardCall& call, const GdnOptions& options) {
  const uint64_t o_bytes = static_cast<uint64_t>(call.total_tokens) *
                           options.shape.num_v_heads * options.shape.head_dim_v *
                           DTypeSize(options.input_dtype);
  return o_bytes + 128 + 11 * call.sequences.size();
}

// The reply's status as the gRPC mapping makes it (one place: grpc_status.h);
// absl's codes are gRPC's numbers, so the channel carries the same code.
absl::Status AsSent(const absl::Status& status) {
  const grpc::Status g = ToGrpcStatus(status);
  return absl::Status(static_cast<absl::StatusCode>(g.error_code()), g.error_message());
}

// `scope`: whoever opened the channel; its calls are that tenant's.
void ServeForward(const ServiceContext* service, const TenantScope& scope,
                  ChannelCall channel_call) {
  const absl::Time start = absl::Now();
  ChannelReply reply = std::move(channel_call.reply);
  auto fail = [&](const absl::Status& status) {
    service->RecordRequest(kMethod, status, start, scope);
    reply(AsSent(scope.Outward(status)), nullptr);
  };
  uint64_t request_id = 0;
  const RegionAccess access = service->RegionAccessFor(scope);
  absl::StatusOr<std::unique_ptr<ForwardCall>> read = ReadForwardRequest(
      channel_call.request, service->config.num_layers, service->config.options,
      service->engine->arena(), &request_id, &access);
  if (read.ok()) {
    if (absl::Status s = ScopeForwardCall(scope, service->tenant_metrics, read->get()); !s.ok()) {
      read = s;
    }
  }
  if (!read.ok()) return fail(read.status());
  std::unique_ptr<ForwardCall> call = std::move(*read);
  if (call->o_region == nullptr) {
    const uint64_t bound = ResponseBound(*call, service->config.options);
    if (bound > channel_call.response_capacity) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "the response may need ", bound, " bytes; the channel's slots hold ",
          channel_call.response_capacity, ": name an o_region, or open the channel with a "
          "larger response capacity")));
    }
  }
  if (absl::Status s = service->EnterCall(); !s.ok()) return fail(s);  // draining: not applied
  call->deadline = channel_call.timeout == absl::InfiniteDuration()
                       ? absl::InfiniteFuture()
                       : start + channel_call.timeout;
  call->is_cancelled = [] { return false; };
  call->enqueued = start;
  call->method = kMethod;
  const int64_t total_tokens = call->total_tokens;
  call->done = [service, reply, start, total_tokens, request_id,
                scope](absl::StatusOr<ForwardResult> result) {
    if (result.ok()) {
      grpc::ByteBuffer encoded = EncodeForwardResult(std::move(*result), total_tokens,
                                                     service->config.options, request_id);
      reply(absl::OkStatus(), &encoded);
    } else {
      reply(AsSent(scope.Outward(result.status())), nullptr);
    }
    service->RecordRequest(kMethod, result.status(), start, scope);
    service->LeaveCall();
  };
  service->engine->SubmitForward(std::move(call));
}

}  // namespace

grpc::ServerUnaryReactor* GdnServiceImpl::OpenChannel(grpc::CallbackServerContext* context,
                                                      const gdn::v1::OpenChannelRequest* request,
                                                      gdn::v1::OpenChannelResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  TenantScope scope;
  if (!Authenticate(*context, reactor, "OpenChannel", start, &scope)) return reactor;
  if (service_->channels == nullptr) {
    FinishUnary(reactor, "OpenChannel", start, NoChannels(), scope);
    return reactor;
  }
  const ServiceContext* service = service_;
  // The channel's calls carry no token: they are the opener's, as
  // authenticated here (anyone else who could write the shared memory could
  // already read it).
  absl::StatusOr<uint32_t> slots = service_->channels->Open(
      scope.owner(), *request,
      [service, scope](ChannelCall call) { ServeForward(service, scope, std::move(call)); });
  if (slots.ok()) response->set_slot_count(*slots);
  FinishUnary(reactor, "OpenChannel", start, slots.status(), scope);
  return reactor;
}

grpc::ServerUnaryReactor* GdnServiceImpl::CloseChannel(grpc::CallbackServerContext* context,
                                                       const gdn::v1::CloseChannelRequest* request,
                                                       gdn::v1::CloseChannelResponse*) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  TenantScope scope;
  if (!Authenticate(*context, reactor, "CloseChannel", start, &scope)) return reactor;
  FinishUnary(reactor, "CloseChannel", start,
              service_->channels == nullptr
                  ? NoChannels()
                  : service_->channels->Close(scope.owner(), request->name()),
              scope);
  return reactor;
}

}  // namespace gdn
