// Speculative drafts end to end (SequenceSpec.draft, CommitDraft) on the
// in-process service with the cpu backend, against the float64 oracle:
// every acceptance count 1..T for T in 2..8 across layers and sessions,
// interleaved with ordinary calls; the refused positions and their
// messages; CommitDraft, Describe, export / fork of an open draft, and a
// drain that commits it.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/rpc/draft_forward_fixture.h"
#include "tests/server/temp_dir.h"

namespace gdn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using gdn::testing::BuildForwardRequest;
using gdn::testing::MakeRandomInputs;

class DraftForwardTest : public gdn::testing::DraftForwardFixture {};

TEST_F(DraftForwardTest, EveryAcceptanceCountMatchesTheOracle) { RunEveryAcceptanceCount(); }

// A draft accepted by a draft: the next draft's position picks k.
TEST_F(DraftForwardTest, ADraftAcceptsTheDraftBeforeIt) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  harness_->CreateSession("a");
  int64_t p = 0;
  for (int k : {3, 1, 4, 2}) {
    Call(1, {{"a", p, 4, true}});
    Accept("a", 1, k);
    p += k;
  }
  Call(1, {{"a", p, 1, false}});
}

// Outside 1..T: a retry of the draft (its own position), behind it, past
// it; each FAILED_PRECONDITION naming the allowed range, and the draft is
// still open and correct afterwards. Bad draft sizes are INVALID_ARGUMENT.
TEST_F(DraftForwardTest, PositionsOutsideTheDraftAreRefused) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  harness_->CreateSession("a");
  Call(0, {{"a", 0, 10, false}});
  Call(0, {{"a", 10, 4, true}});
  for (int64_t bad : {10, 9, 15, 20}) {
    ExpectRefused(0, "a", bad, "allowed positions [11, 14]");
  }
  ExpectRefused(0, "a", 10, "uncommitted draft of 4 tokens", 4, true);  // the retry
  EXPECT_EQ(harness_->Describe("a").layers(0).draft_tokens(), 4);
  Accept("a", 0, 2);
  Call(0, {{"a", 12, 2, false}});
  ExpectRefused(0, "a", 12, "expected position 14");  // an ordinary layer again

  for (int tokens : {1, kMaxDecodeTokens + 1}) {
    const oracle::Inputs inputs = MakeRandomInputs(options_, {tokens}, seed_, false);
    gdn::v1::ForwardRequest request = BuildForwardRequest(options_, 0, {{"a", 14}}, inputs);
    request.mutable_sequences(0)->set_draft(true);
    gdn::v1::ForwardResponse response;
    const grpc::Status status = harness_->Forward(request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("sequences[0].draft"));
  }
  Call(0, {{"a", 14, 1, false}});
}

// CommitDraft: all layers with a draft or the named ones, all or nothing;
// a retry is harmless; export and fork wait for it with a clear error.
TEST_F(DraftForwardTest, CommitDraftWithoutACall) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  harness_->CreateSession("a");
  Call(0, {{"a", 0, 6, true}});
  Call(1, {{"a", 0, 6, true}});

  {
    grpc::ClientContext context;
    gdn::v1::ForkSessionRequest request;
    request.set_parent_id("a");
    request.set_child_id("c");
    gdn::v1::ForkSessionResponse forked;
    const grpc::Status st = harness_->stub().ForkSession(&context, request, &forked);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(st.error_message(), HasSubstr("uncommitted draft of 6 tokens"));
  }
  {
    grpc::ClientContext context;
    gdn::v1::ExportSessionRequest request;
    request.set_session_id("a");
    auto reader = harness_->stub().ExportSession(&context, request);
    gdn::v1::SessionChunk chunk;
    while (reader->Read(&chunk)) {
    }
    const grpc::Status st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(st.error_message(), HasSubstr("commit it first"));
  }

  gdn::v1::CommitDraftResponse response;
  grpc::Status st = CommitDraft("a", 7, {}, &response);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(st.error_message(), HasSubstr("[1, 6]"));
  EXPECT_EQ(CommitDraft("a", 3, {5}, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(CommitDraft("x", 3, {}, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(harness_->Describe("a").layers(0).draft_tokens(), 6);  // nothing changed

  st = CommitDraft("a", 3, {1}, &response);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_THAT(response.layers(), ElementsAre(1));
  EXPECT_THAT(response.accepted_tokens(), ElementsAre(3));
  Accept("a", 1, 3);
  st = CommitDraft("a", 5, {}, &response);  // every layer still open: layer 0
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_THAT(response.layers(), ElementsAre(0));
  EXPECT_THAT(response.accepted_tokens(), ElementsAre(5));
  Accept("a", 0, 5);
  st = CommitDraft("a", 5, {0}, &response);  // a retry
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(response.layers_size(), 0);

  const gdn::v1::DescribeSessionResponse d = harness_->Describe("a");
  EXPECT_EQ(d.layers(0).position(), 5);
  EXPECT_EQ(d.layers(1).position(), 3);
  EXPECT_EQ(d.layers(0).draft_tokens(), 0);
  Call(0, {{"a", 5, 2, false}});
  Call(1, {{"a", 3, 1, false}});
}

// A draining server commits every open draft in full: the session it hands
// over through --snapshot_dir stands after all draft tokens, and the next
// server continues from exactly that state.
class DraftDrainTest : public gdn::testing::DraftForwardFixture {
 protected:
  ServerConfig MakeConfig() override {
    ServerConfig config = gdn::testing::SmallServerConfig();
    config.snapshot_dir = dir_.path();
    return config;
  }
  gdn::testing::TempDir dir_{"draft_drain_test"};
};

TEST_F(DraftDrainTest, ADrainCommitsEveryDraftInFull) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  harness_->CreateSession("a");
  Call(0, {{"a", 0, 3, false}});
  Call(0, {{"a", 3, 4, true}});
  Call(1, {{"a", 0, 2, true}});
  const ServerConfig config = harness_->config();
  harness_->server().Shutdown();
  EXPECT_EQ(harness_->server().drain_report().written, 1);
  EXPECT_EQ(harness_->server().sessions_lost(), 0);
  harness_ = std::make_unique<gdn::testing::ServerHarness>(config);
  const gdn::v1::DescribeSessionResponse d = harness_->Describe("a");  // restored
  EXPECT_EQ(d.layers(0).position(), 7);
  EXPECT_EQ(d.layers(1).position(), 2);
  EXPECT_EQ(d.layers(0).draft_tokens(), 0);
  Accept("a", 0, 4);
  Accept("a", 1, 2);
  Call(0, {{"a", 7, 1, false}});
  Call(1, {{"a", 2, 2, false}});
  ExpectRefused(0, "a", 5, "expected position 8");  // no draft left to choose in
}

}  // namespace
}  // namespace gdn
