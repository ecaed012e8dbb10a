#include "server/rpc/grpc_status.h"

#include <string>

#include "gtest/gtest.h"

namespace gdn {
namespace {

TEST(ToGrpcStatusTest, OkIsOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(ToGrpcStatusTest, EveryCanonicalCodeKeepsItsNumberAndMessage) {
  // absl's canonical codes are gRPC's: 1..16.
  for (int code = 1; code <= 16; ++code) {
    const std::string message = "message for code " + std::to_string(code);
    const absl::Status status(static_cast<absl::StatusCode>(code), message);
    const grpc::Status mapped = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(mapped.error_code()), code);
    EXPECT_EQ(mapped.error_message(), message);
  }
}

TEST(ToGrpcStatusTest, NamedCodes) {
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("x")).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("x")).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(ToGrpcStatus(absl::ResourceExhaustedError("x")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("x")).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(absl::DeadlineExceededError("x")).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST(ToGrpcStatusTest, UnknownCodeBecomesUnknown) {
  const absl::Status odd(static_cast<absl::StatusCode>(99), "odd");
  EXPECT_EQ(ToGrpcStatus(odd).error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(ToGrpcStatus(odd).error_message(), "odd");
}

}  // namespace
}  // namespace gdn
