// The one place where absl::Status (used everywhere inside the server) becomes
// a grpc::Status on the wire. Pure; safe from any thread.
#ifndef GDN_SERVER_RPC_GRPC_STATUS_H_
#define GDN_SERVER_RPC_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace gdn {

// Same code (absl's codes are gRPC's canonical codes), same message. An
// out-of-range code becomes UNKNOWN.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace gdn

#endif  // GDN_SERVER_RPC_GRPC_STATUS_H_
