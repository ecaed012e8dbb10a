#include "client/grpc_status.h"

#include "gtest/gtest.h"

namespace gdn::client {
namespace {

TEST(GrpcStatusTest, KeepsCodeAndMessage) {
  for (int code = 1; code <= 16; ++code) {
    const grpc::Status g(static_cast<grpc::StatusCode>(code), "msg " + std::to_string(code));
    const absl::Status a = FromGrpcStatus(g);
    EXPECT_EQ(static_cast<int>(a.code()), code);
    EXPECT_EQ(a.message(), "msg " + std::to_string(code));
  }
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatusTest, FieldCodesAndNames) {
  EXPECT_TRUE(FromGrpcCode(0, "ignored").ok());
  EXPECT_EQ(FromGrpcCode(9, "pos").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(FromGrpcCode(42, "bad").code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(GrpcCodeName(absl::StatusCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(GrpcCodeName(absl::StatusCode::kOk), "OK");
}

}  // namespace
}  // namespace gdn::client
