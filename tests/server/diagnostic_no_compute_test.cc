// --diagnostic_no_compute (server_config.h): Forward calls are validated and
// answered with zeros of the right shape, positions advance as if applied,
// no state is written, and the mode is named in GetServerInfo's device.
#include <grpcpp/grpcpp.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"
#include "tests/server/test_random.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;
using gdn::testing::BuildForwardRequest;
using gdn::testing::MakeRandomInputs;

// Whether every byte of the tensor's data is zero.
bool AllZero(const gdn::v1::Tensor& t) {
  for (char c : t.data()) {
    if (c != 0) return false;
  }
  return true;
}

class DiagnosticNoComputeTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ServerConfig config = gdn::testing::SmallServerConfig();
    config.diagnostic_no_compute = GetParam();
    harness_ = std::make_unique<gdn::testing::ServerHarness>(config);
    ASSERT_NE(harness_->channel(), nullptr);
    seed_ = gdn::testing::FreshSeed();
  }

  gdn::v1::ForwardRequest Call(int layer, const std::string& session,
                               int64_t position, int tokens) {
    const oracle::Inputs in = MakeRandomInputs(harness_->config().options, {tokens},
                                               seed_ + (++calls_) * 7919, false);
    return BuildForwardRequest(harness_->config().options, layer, {{session, position}}, in);
  }

  std::unique_ptr<gdn::testing::ServerHarness> harness_;
  uint64_t seed_ = 0;
  int calls_ = 0;
};

TEST_P(DiagnosticNoComputeTest, AnswersShapeAndPositionsWithoutComputing) {
  const bool diagnostic = GetParam();
  const std::string id = harness_->CreateSession("diag");
  const LayerShape& s = harness_->config().options.shape;

  gdn::v1::ForwardResponse prefill;
  ASSERT_TRUE(harness_->Forward(Call(1, id, 0, 37), &prefill).ok());
  ASSERT_EQ(prefill.o().shape_size(), 3);
  EXPECT_EQ(prefill.o().shape(0), 37);
  EXPECT_EQ(prefill.o().shape(1), s.num_v_heads);
  EXPECT_EQ(prefill.o().shape(2), s.head_dim_v);
  EXPECT_EQ(static_cast<int64_t>(prefill.o().data().size()),
            int64_t{37} * s.num_v_heads * s.head_dim_v *
                DTypeSize(harness_->config().options.input_dtype));
  ASSERT_EQ(prefill.positions_size(), 1);
  EXPECT_EQ(prefill.positions(0), 37);
  // Random inputs give a non-zero o only when the kernel runs.
  EXPECT_EQ(AllZero(prefill.o()), diagnostic);

  gdn::v1::ForwardResponse decode;
  ASSERT_TRUE(harness_->Forward(Call(1, id, 37, 1), &decode).ok());
  EXPECT_EQ(decode.positions(0), 38);
  EXPECT_EQ(AllZero(decode.o()), diagnostic);

  // Validation and ordering still apply: a wrong position is refused.
  gdn::v1::ForwardResponse refused;
  EXPECT_FALSE(harness_->Forward(Call(1, id, 5, 1), &refused,
                                 absl::Milliseconds(300)).ok());

  const gdn::v1::DescribeSessionResponse d = harness_->Describe(id);
  ASSERT_GT(d.layers_size(), 1);
  EXPECT_EQ(d.layers(1).position(), 38);

  grpc::ClientContext context;
  gdn::v1::ServerInfoResponse info;
  ASSERT_TRUE(harness_->stub().GetServerInfo(&context, {}, &info).ok());
  if (diagnostic) {
    EXPECT_THAT(info.device(), HasSubstr("DIAGNOSTIC no-compute"));
  } else {
    EXPECT_THAT(info.device(), ::testing::Not(HasSubstr("DIAGNOSTIC")));
  }
}

INSTANTIATE_TEST_SUITE_P(ComputeOrNot, DiagnosticNoComputeTest, ::testing::Bool());

}  // namespace
}  // namespace gdn
