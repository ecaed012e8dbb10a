// One unary gRPC call with raw bytes in and out (grpc::GenericStub): no
// protobuf message objects, so a request encoded in place
// (proto/forward_wire.h) goes out as its slices and the response comes back
// as the slices gRPC received.
//
// Two ways to wait for it, both public gRPC API:
//   kCompletionQueue (default): the calling thread drives a completion queue
//     of its own until the call ends, as a generated blocking stub does: no
//     thread hop.
//   kCallback: gRPC's callback API; the caller sleeps on a condition variable
//     that a gRPC thread signals (one hop more; kept to measure it).
// Safe from any number of threads at once (each call has its own queue).
#ifndef GDN_CLIENT_RAW_UNARY_CALL_H_
#define GDN_CLIENT_RAW_UNARY_CALL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace gdn::client {

enum class RawCallApi { kCompletionQueue, kCallback };

absl::StatusOr<RawCallApi> ParseRawCallApi(absl::string_view name);  // "cq", "callback"

// `method` is the full name, e.g. "/gdn.v1.GdnService/Forward". The request
// is not consumed (gRPC takes references to its slices), so a retry may send
// it again.
grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                          grpc::ClientContext* context, const grpc::ByteBuffer& request,
                          grpc::ByteBuffer* response,
                          RawCallApi api = RawCallApi::kCompletionQueue);

}  // namespace gdn::client

#endif  // GDN_CLIENT_RAW_UNARY_CALL_H_
