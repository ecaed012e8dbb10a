// End to end through the C++ client: prefix reuse with
// Session::ForwardKeeping (kept states every 64 tokens) and Session::ForkAt,
// checked against the float64 oracle model: the child continues from the
// prefix; exported states match; a position without kept states is refused.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/client/e2e/e2e_fixture.h"

namespace gdn::e2e {
namespace {

using client::Session;
using ::testing::HasSubstr;

class PrefixE2eTest : public E2eTest {};

TEST_F(PrefixE2eTest, ForkAtAKeptPositionContinuesFromThePrefix) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const int layers = info_.config().num_layers();
  absl::StatusOr<Session> s = Session::Create(client_.get(), "sys");
  ASSERT_TRUE(s.ok()) << s.status();
  const oracle::Inputs prompt = model_->MakeInputs({200}, 11);
  for (int layer = 0; layer < layers; ++layer) {
    absl::StatusOr<std::vector<float>> o =
        s->ForwardKeeping(layer, 200, OracleModel::ToClientInputs(prompt), 64);
    ASSERT_TRUE(o.ok()) << o.status();
  }
  absl::StatusOr<v1::DescribeSessionResponse> d = client_->DescribeSession("sys");
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(d->layers(0).kept_positions(), ::testing::ElementsAre(64, 128, 192));

  absl::StatusOr<Session> child = s->ForkAt(128, "child");
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(child->position(layers - 1), 128);
  // The model's child: the prompt's first 128 tokens on every layer.
  model_->AddSession("child");
  for (int layer = 0; layer < layers; ++layer) {
    model_->Forward(layer, {"child"}, testing::SliceSequence(options_, prompt, 0, 0, 128, {}));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch("child"));
  for (int layer = 0; layer < layers; ++layer) {
    ASSERT_NO_FATAL_FAILURE(ForwardChecked(layer, {&*child}, {3}, 20 + layer));
  }
  const absl::Status refused = s->ForkAt(100, "other").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("[64, 128, 192, 200]"));
}

}  // namespace
}  // namespace gdn::e2e
