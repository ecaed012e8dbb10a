#include "server/engine/admission.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;

ForwardSequence Seq(const std::string& session, int64_t position,
                    int32_t tokens) {
  ForwardSequence s;
  s.session = session;
  s.position = position;
  s.num_tokens = tokens;
  return s;
}

class AdmissionTest : public ::testing::Test {
 protected:
  AdmissionDecision Decide(const std::vector<ForwardSequence>& seqs) {
    return DecideAdmission(4, seqs, [this](const std::string& session) {
      auto it = states_.find(session);
      return it == states_.end() ? KeyState{} : it->second;
    });
  }
  void Set(const std::string& session, int64_t stored, int64_t running = 0) {
    KeyState s;
    s.session_exists = true;
    s.stored_position = stored;
    s.busy = running > 0;
    s.running_tokens = running;
    states_[session] = s;
  }
  std::map<std::string, KeyState> states_;
};

TEST_F(AdmissionTest, RunsAtTheStoredPosition) {
  Set("a", 12);
  Set("b", 0);
  EXPECT_EQ(Decide({Seq("a", 12, 1), Seq("b", 0, 30)}).action,
            AdmissionAction::kRun);
}

TEST_F(AdmissionTest, UnknownSessionIsNotFound) {
  Set("a", 0);
  const AdmissionDecision d = Decide({Seq("a", 0, 1), Seq("ghost", 0, 1)});
  EXPECT_EQ(d.action, AdmissionAction::kReject);
  EXPECT_EQ(d.status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(d.status.message(), HasSubstr("ghost"));
}

TEST_F(AdmissionTest, BehindIsFailedPreconditionWithTheExpectedPosition) {
  Set("a", 40);
  const AdmissionDecision d = Decide({Seq("a", 39, 1)});
  EXPECT_EQ(d.action, AdmissionAction::kReject);
  EXPECT_EQ(d.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status.message(), HasSubstr("expected position 40"));
}

TEST_F(AdmissionTest, BehindCountsTheRunningCall) {
  // Stored 10, a running call brings 5 more: a retry at 10 is behind 15.
  Set("a", 10, 5);
  const AdmissionDecision d = Decide({Seq("a", 10, 5)});
  EXPECT_EQ(d.action, AdmissionAction::kReject);
  EXPECT_THAT(d.status.message(), HasSubstr("expected position 15"));
}

TEST_F(AdmissionTest, PipelinedNextCallWaitsForTheRunningOne) {
  Set("a", 10, 5);
  EXPECT_EQ(Decide({Seq("a", 15, 1)}).action, AdmissionAction::kWait);
}

TEST_F(AdmissionTest, AheadIsParked) {
  Set("a", 10);
  EXPECT_EQ(Decide({Seq("a", 11, 1)}).action, AdmissionAction::kWait);
  // Parking order: once the gap is filled the parked call runs.
  Set("a", 11);
  EXPECT_EQ(Decide({Seq("a", 11, 1)}).action, AdmissionAction::kRun);
}

TEST_F(AdmissionTest, AllOrNothing) {
  Set("a", 0);
  Set("b", 7, 3);  // busy
  EXPECT_EQ(Decide({Seq("a", 0, 1), Seq("b", 10, 1)}).action,
            AdmissionAction::kWait);
  // One sequence behind rejects the whole call, even if others could run.
  const AdmissionDecision d = Decide({Seq("a", 0, 1), Seq("b", 8, 1)});
  EXPECT_EQ(d.action, AdmissionAction::kReject);
  EXPECT_THAT(d.status.message(), HasSubstr("sequences[1]"));
}

// Drafts: an open draft of 4 tokens after 20 (stored at 24) lets 21..24 run
// and refuses every other position naming [21, 24]; while the draft call
// runs, 21..24 wait, a retry of it (20) is refused, past it waits.
TEST_F(AdmissionTest, OpenDraftTakesItsRangeOnly) {
  Set("a", 24);
  states_["a"].open_draft_tokens = 4;
  for (int64_t position = 21; position <= 24; ++position) {
    EXPECT_EQ(Decide({Seq("a", position, 1)}).action, AdmissionAction::kRun) << position;
  }
  for (int64_t position : {0, 19, 20, 25, 30}) {
    const AdmissionDecision d = Decide({Seq("a", position, 3)});
    EXPECT_EQ(d.action, AdmissionAction::kReject) << position;
    EXPECT_EQ(d.status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(d.status.message(), HasSubstr("uncommitted draft of 4 tokens"));
    EXPECT_THAT(d.status.message(), HasSubstr("allowed positions [21, 24]"));
    EXPECT_THAT(d.status.message(), HasSubstr(absl::StrCat("got position ", position)));
  }
}

TEST_F(AdmissionTest, RunningDraftHoldsItsRange) {
  Set("a", 20, 4);
  states_["a"].running_draft = true;
  for (int64_t position : {21, 23, 24, 25, 40}) {
    EXPECT_EQ(Decide({Seq("a", position, 1)}).action, AdmissionAction::kWait) << position;
  }
  const AdmissionDecision retry = Decide({Seq("a", 20, 4)});
  EXPECT_EQ(retry.action, AdmissionAction::kReject);
  EXPECT_EQ(retry.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(retry.status.message(), HasSubstr("allowed positions [21, 24]"));
  // A non-draft running call keeps the ordinary rule.
  states_["a"].running_draft = false;
  EXPECT_EQ(Decide({Seq("a", 21, 1)}).action, AdmissionAction::kReject);
}

}  // namespace
}  // namespace gdn
