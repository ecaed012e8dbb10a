// The one place where gRPC statuses become absl::Status (and back, for the
// code names the bench and the CLI print). The numeric codes of the two
// libraries are the same canonical codes, so the mapping is direct.
#ifndef GDN_CLIENT_GRPC_STATUS_H_
#define GDN_CLIENT_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace gdn::client {

// OK stays OK; any other code keeps its code and message (details dropped).
absl::Status FromGrpcStatus(const grpc::Status& status);

// A code carried in a message field (ForwardResponse.error_code on streams).
// Unknown numbers map to kUnknown.
absl::Status FromGrpcCode(int code, absl::string_view message);

// "OK", "INVALID_ARGUMENT", ... as gRPC spells them (used as report keys).
std::string GrpcCodeName(absl::StatusCode code);

}  // namespace gdn::client

#endif  // GDN_CLIENT_GRPC_STATUS_H_
