// Prefix reuse end to end (SequenceSpec.checkpoint_interval,
// ForkSessionRequest.at_position) on the in-process service with the cpu
// backend, against the float64 oracle: a prompt prefilled keeping a state
// every 64 tokens, prefilled in 64-token chunks (kept states at chunk ends,
// copied before the next chunk) and in one chunk (kept states written by the
// kernel); forks at every kept position continue exactly from the prefix;
// other positions and bad intervals are refused with what is available.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"
#include "tests/server/test_random.h"

namespace gdn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using gdn::testing::BuildForwardRequest;
using gdn::testing::MakeRandomInputs;
using gdn::testing::OracleModel;
using gdn::testing::SliceSequence;

constexpr double kTolerance = 2e-4;  // fp32 cpu backend against float64
constexpr int kPrompt = 300;

class PrefixForkTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    seed_ = gdn::testing::FreshSeed();
    ServerConfig config = gdn::testing::SmallServerConfig();
    config.max_batch_tokens = GetParam();  // 64: a chunk per kept state; 512: one chunk
    harness_ = std::make_unique<gdn::testing::ServerHarness>(config);
    ASSERT_NE(harness_->channel(), nullptr);
    options_ = harness_->config().options;
  }

  grpc::Status Fork(const std::string& parent, const std::string& child, int64_t at) {
    grpc::ClientContext context;
    gdn::v1::ForkSessionRequest request;
    request.set_parent_id(parent);
    request.set_child_id(child);
    request.set_at_position(at);
    gdn::v1::ForkSessionResponse response;
    return harness_->stub().ForkSession(&context, request, &response);
  }

  uint64_t seed_ = 0;
  std::unique_ptr<gdn::testing::ServerHarness> harness_;
  GdnOptions options_;
};

TEST_P(PrefixForkTest, ForksAtEveryKeptPositionContinueFromThePrefix) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  harness_->CreateSession("p");
  const oracle::Inputs prompt = MakeRandomInputs(options_, {kPrompt}, seed_, false);
  for (int layer = 0; layer < 2; ++layer) {
    gdn::v1::ForwardRequest request = BuildForwardRequest(options_, layer, {{"p", 0}}, prompt);
    request.mutable_sequences(0)->set_checkpoint_interval(64);
    gdn::v1::ForwardResponse response;
    const grpc::Status status = harness_->Forward(request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  const gdn::v1::DescribeSessionResponse d = harness_->Describe("p");
  for (int layer = 0; layer < 2; ++layer) {
    EXPECT_THAT(d.layers(layer).kept_positions(), ElementsAre(64, 128, 192, 256));
  }
  for (int64_t at : {64, 128, 192, 256, 300}) {
    SCOPED_TRACE(absl::StrCat("at ", at));
    const std::string child = absl::StrCat("c", at);
    const grpc::Status forked = Fork("p", child, at);
    ASSERT_TRUE(forked.ok()) << forked.error_message();
    EXPECT_EQ(harness_->Describe(child).layers(1).position(), at);
    const oracle::Inputs next = MakeRandomInputs(options_, {5}, seed_ + at, false);
    for (int layer = 0; layer < 2; ++layer) {
      OracleModel model(options_);
      model.Apply(layer, {child}, SliceSequence(options_, prompt, 0, 0, static_cast<int>(at), {}));
      const std::vector<double> expected = model.Apply(layer, {child}, next);
      gdn::v1::ForwardResponse response;
      const grpc::Status status =
          harness_->Forward(BuildForwardRequest(options_, layer, {{child, at}}, next), &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_LT(gdn::testing::MaxRelError(response.o(), expected), kTolerance) << layer;
    }
  }
  // The parent is unchanged by its children's writes: a fork at 128 again
  // continues from the prefix too.
  ASSERT_TRUE(Fork("p", "again", 128).ok());
  OracleModel model(options_);
  model.Apply(0, {"again"}, SliceSequence(options_, prompt, 0, 0, 128, {}));
  const oracle::Inputs next = MakeRandomInputs(options_, {2}, seed_ + 7, false);
  const std::vector<double> expected = model.Apply(0, {"again"}, next);
  gdn::v1::ForwardResponse response;
  ASSERT_TRUE(
      harness_->Forward(BuildForwardRequest(options_, 0, {{"again", 128}}, next), &response).ok());
  EXPECT_LT(gdn::testing::MaxRelError(response.o(), expected), kTolerance);
}

TEST_P(PrefixForkTest, OtherPositionsAndBadIntervalsAreRefused) {
  harness_->CreateSession("p");
  const oracle::Inputs prompt = MakeRandomInputs(options_, {200}, seed_, false);
  gdn::v1::ForwardRequest request = BuildForwardRequest(options_, 0, {{"p", 0}}, prompt);
  request.mutable_sequences(0)->set_checkpoint_interval(128);
  gdn::v1::ForwardResponse response;
  ASSERT_TRUE(harness_->Forward(request, &response).ok());
  // Layer 1 was never written: it stands at 0, so only 0 is common.
  grpc::Status st = Fork("p", "c", 128);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(st.error_message(), HasSubstr("positions available on every layer: []"));
  request.set_layer(1);
  ASSERT_TRUE(harness_->Forward(request, &response).ok());
  for (int64_t bad : {0, 64, 100, 199}) {
    st = Fork("p", "c", bad);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << bad;
    EXPECT_THAT(st.error_message(), HasSubstr("positions available on every layer: [128, 200]"));
  }
  EXPECT_TRUE(Fork("p", "c", 128).ok());

  const oracle::Inputs more = MakeRandomInputs(options_, {70}, seed_ + 1, false);
  for (auto [position, interval, what] :
       {std::make_tuple(200, 64, "must start at a multiple of 64"),
        std::make_tuple(192, 32, "positive multiple of 64")}) {
    gdn::v1::ForwardRequest bad = BuildForwardRequest(options_, 0, {{"c", position}}, more);
    bad.mutable_sequences(0)->set_checkpoint_interval(interval);
    const grpc::Status refused = harness_->Forward(bad, &response);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what;
    EXPECT_THAT(refused.error_message(), HasSubstr(what));
  }
}

INSTANTIATE_TEST_SUITE_P(Chunks, PrefixForkTest, ::testing::Values(64, 512));

}  // namespace
}  // namespace gdn
