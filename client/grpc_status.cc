#include "client/grpc_status.h"

#include <string>

#include "absl/strings/ascii.h"

namespace gdn::client {

absl::Status FromGrpcCode(int code, absl::string_view message) {
  // grpc::StatusCode and absl::StatusCode are both the canonical codes 0..16.
  if (code == 0) return absl::OkStatus();
  if (code < 0 || code > 16) {
    return absl::UnknownError(message);
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return FromGrpcCode(static_cast<int>(status.error_code()),
                      status.error_message());
}

std::string GrpcCodeName(absl::StatusCode code) {
  // absl spells "INVALID_ARGUMENT" the same way as gRPC, save for case.
  return absl::AsciiStrToUpper(absl::StatusCodeToString(code));
}

}  // namespace gdn::client
