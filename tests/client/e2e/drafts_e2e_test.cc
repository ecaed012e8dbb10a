// End to end through the C++ client: speculative drafts with
// Session::ForwardDraft, Accept (the next Forward commits) and Commit
// (CommitDraft), checked against the float64 oracle model: o of the draft,
// the accepted states (exported and compared), and the refused positions.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "kernels/testing/error_stats.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/client/e2e/e2e_fixture.h"

namespace gdn::e2e {
namespace {

using client::Session;
using ::testing::HasSubstr;

class DraftsE2eTest : public E2eTest {
 protected:
  // A draft of `tokens` on `layer` of `s`: o checked against the model run
  // on a copy (the model itself advances only by what Accept keeps).
  void Draft(Session& s, int layer, int tokens, uint64_t seed) {
    inputs_ = model_->MakeInputs({tokens}, seed);
    OracleModel peek = *model_;
    const std::vector<double> ref = peek.Forward(layer, {s.id()}, inputs_);
    absl::StatusOr<std::vector<float>> o =
        s.ForwardDraft(layer, tokens, OracleModel::ToClientInputs(inputs_));
    ASSERT_TRUE(o.ok()) << o.status();
    ASSERT_EQ(o->size(), ref.size());
    const testing::ErrorStats err = testing::Compare(o->data(), ref.data(), ref.size());
    EXPECT_LT(err.max_abs_rel, OutputTolerance()) << testing::ToString(err);
    EXPECT_EQ(s.draft_tokens(layer), tokens);
  }
  // The model's side of keeping `accepted` tokens of the last draft.
  void Keep(Session& s, int layer, int accepted) {
    model_->Forward(layer, {s.id()},
                    testing::SliceSequence(options_, inputs_, 0, 0, accepted, {}));
  }

  oracle::Inputs inputs_;
};

TEST_F(DraftsE2eTest, AcceptThenForwardAndCommit) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  absl::StatusOr<Session> s = Session::Create(client_.get(), "spec");
  ASSERT_TRUE(s.ok()) << s.status();
  model_->AddSession("spec");
  ASSERT_NO_FATAL_FAILURE(ForwardChecked(0, {&*s}, {9}, 1));
  // Accept 3 of 5, then the next Forward (at 9 + 3) commits them.
  ASSERT_NO_FATAL_FAILURE(Draft(*s, 0, 5, 2));
  EXPECT_EQ(s->position(0), 14);
  ASSERT_TRUE(s->Accept(0, 3).ok());
  EXPECT_EQ(s->position(0), 12);
  Keep(*s, 0, 3);
  ASSERT_NO_FATAL_FAILURE(ForwardChecked(0, {&*s}, {1}, 3));
  ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch("spec"));

  // Drafts on two layers, committed without a call (end of generation).
  ASSERT_NO_FATAL_FAILURE(Draft(*s, 0, 4, 4));
  Keep(*s, 0, 2);
  ASSERT_NO_FATAL_FAILURE(Draft(*s, 1, 4, 5));
  Keep(*s, 1, 2);
  // Export waits for the commit.
  const absl::Status refused = client_->ExportSession("spec").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("commit it first"));
  ASSERT_TRUE(s->Commit(2).ok());
  EXPECT_EQ(s->position(0), 15);
  EXPECT_EQ(s->position(1), 2);
  EXPECT_EQ(s->draft_tokens(0), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch("spec"));
  ASSERT_TRUE(s->Resync().ok());
  EXPECT_EQ(s->position(0), 15);
}

TEST_F(DraftsE2eTest, WrongPositionIsRefusedAndResyncs) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  absl::StatusOr<Session> s = Session::Create(client_.get(), "spec2");
  ASSERT_TRUE(s.ok()) << s.status();
  model_->AddSession("spec2");
  ASSERT_NO_FATAL_FAILURE(Draft(*s, 2, 3, 7));
  EXPECT_EQ(s->Accept(2, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Accept(1, 1).code(), absl::StatusCode::kFailedPrecondition);
  // Not accepting: the next call at p + T accepts all of them.
  Keep(*s, 2, 3);
  ASSERT_NO_FATAL_FAILURE(ForwardChecked(2, {&*s}, {2}, 8));
  // A retry of a draft at its own position is refused naming the range.
  ASSERT_NO_FATAL_FAILURE(Draft(*s, 2, 2, 9));
  s->SetPosition(2, 5);
  const oracle::Inputs again = model_->MakeInputs({2}, 9);
  absl::StatusOr<std::vector<float>> o =
      s->ForwardDraft(2, 2, OracleModel::ToClientInputs(again));
  EXPECT_EQ(o.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(o.status().message(), HasSubstr("allowed positions [6, 7]"));
  EXPECT_EQ(s->position(2), 7);  // resynced
  EXPECT_EQ(s->draft_tokens(2), 2);
}

}  // namespace
}  // namespace gdn::e2e
