// Forward with the request and the response as bytes: the request a
// grpc::ByteBuffer encoded in place (wire::EncodeForwardRequest: tensor
// payloads are slices of the caller's memory), the response scanned where it
// arrived (wire::ScanForwardResponse: o is a span of the received slices,
// read or copied by the caller only if it wants to). No protobuf message
// object and no tensor copy on either side; gdn-bench's unary path.
//
// The call behaves like GdnClient::Forward's single call: the same deadline,
// `x-gdn-route` header (client/routing_key.h), UNAVAILABLE retried under the
// same policy (client/retry.h), and errors mapped by client/grpc_status.h: a
// failed RPC by its gRPC status, a response carrying error_code by that code
// and message (the same for retries: an UNAVAILABLE error_code is retried).
// A response that does not parse is Internal. It does not split: a request
// over the message limit is the caller's to split (forward_parts_split.h).
//
// Thread-safe: any number of threads may call at once on one channel.
#ifndef GDN_CLIENT_RAW_FORWARD_H_
#define GDN_CLIENT_RAW_FORWARD_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/gdn_client.h"
#include "client/raw_unary_call.h"
#include "client/retry.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/forward_wire.h"

namespace gdn::client {

inline constexpr char kForwardMethod[] = "/gdn.v1.GdnService/Forward";

// Per-call settings: GdnClient's (RawCallOptionsFor) plus the route key.
struct RawCallOptions {
  absl::Duration deadline = absl::Seconds(120);  // per try; InfiniteDuration: none
  RetryPolicy retry;
  RetryObserver on_retry;  // may be empty
  std::string route_key;   // sent as x-gdn-route; empty: no header
  RawCallApi api = RawCallApi::kCompletionQueue;
};

// `options`' deadline, retry policy and observer, with `route_key`.
RawCallOptions RawCallOptionsFor(const GdnClientOptions& options, std::string route_key);

struct RawForwardResponse {
  wire::WireMessage message;           // the received slices, held (no copy)
  wire::ForwardResponseFields fields;  // fields.o.data: a span of `message`
};

// `channel`: a shared_ptr because grpc::GenericStub takes one (any channel
// works; MakeGdnChannel's has the tuned transport). The request is not
// consumed and may be sent again.
absl::StatusOr<RawForwardResponse> ForwardRaw(const std::shared_ptr<grpc::Channel>& channel,
                                              const grpc::ByteBuffer& request,
                                              const RawCallOptions& options);

}  // namespace gdn::client

#endif  // GDN_CLIENT_RAW_FORWARD_H_
