// The driver of the speculative-draft end-to-end tests (SequenceSpec.draft,
// CommitDraft): calls checked against the float64 oracle, with the oracle
// advancing only by the draft tokens a test accepts. The cpu backend's test
// (draft_forward_test.cc) and the cuda one (tests/gpu/server_cuda_draft_test.cc)
// share it.
#ifndef GDN_TESTS_SERVER_RPC_DRAFT_FORWARD_FIXTURE_H_
#define GDN_TESTS_SERVER_RPC_DRAFT_FORWARD_FIXTURE_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"
#include "tests/server/test_random.h"

namespace gdn::testing {

// One sequence of a call: session, position, tokens, draft or not.
struct Part {
  std::string session;
  int64_t position;
  int tokens;
  bool draft;
};

class DraftForwardFixture : public ::testing::Test {
 protected:
  // The server: the cpu backend's small shape unless a subclass says.
  virtual ServerConfig MakeConfig() { return gdn::testing::SmallServerConfig(); }
  virtual double Tolerance() const { return 2e-4; }  // fp32 cpu backend against float64

  void SetUp() override {
    seed_ = gdn::testing::FreshSeed();
    harness_ = std::make_unique<gdn::testing::ServerHarness>(MakeConfig());
    ASSERT_NE(harness_->channel(), nullptr);
    options_ = harness_->config().options;
    oracle_ = std::make_unique<OracleModel>(options_);
  }

  // Sends one call; checks o against the oracle. The oracle's states advance
  // for the ordinary sequences only: a draft's inputs are kept in
  // drafts_[{session, layer}] until Accept.
  void Call(int layer, const std::vector<Part>& parts) {
    std::vector<int> lens;
    std::vector<std::string> sessions;
    std::vector<SeqSpec> specs;
    for (const Part& p : parts) {
      lens.push_back(p.tokens);
      sessions.push_back(p.session);
      specs.push_back({p.session, p.position});
    }
    const oracle::Inputs inputs =
        MakeRandomInputs(options_, lens, seed_ + (++calls_) * 7919, false);
    OracleModel peek = *oracle_;  // o of every sequence, drafts included
    const std::vector<double> expected = peek.Apply(layer, sessions, inputs);
    for (size_t i = 0; i < parts.size(); ++i) {
      const oracle::Inputs one = gdn::testing::SliceSequence(
          options_, inputs, static_cast<int>(i), 0, parts[i].tokens, {});
      if (parts[i].draft) {
        drafts_[{parts[i].session, layer}] = one;
      } else {
        oracle_->Apply(layer, {parts[i].session}, one);
      }
    }
    gdn::v1::ForwardRequest request = BuildForwardRequest(options_, layer, specs, inputs);
    for (size_t i = 0; i < parts.size(); ++i) {
      request.mutable_sequences(i)->set_draft(parts[i].draft);
    }
    gdn::v1::ForwardResponse response;
    const grpc::Status status = harness_->Forward(request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.positions_size(), static_cast<int>(parts.size()));
    for (size_t i = 0; i < parts.size(); ++i) {
      EXPECT_EQ(response.positions(i), parts[i].position + parts[i].tokens);
    }
    EXPECT_LT(gdn::testing::MaxRelError(response.o(), expected), Tolerance());
  }

  // The oracle's side of accepting k tokens of (session, layer)'s draft.
  void Accept(const std::string& session, int layer, int k) {
    const oracle::Inputs& draft = drafts_.at({session, layer});
    oracle_->Apply(layer, {session},
                   gdn::testing::SliceSequence(options_, draft, 0, 0, k, {}));
    drafts_.erase({session, layer});
  }

  // A one-token call at `position` that must fail FAILED_PRECONDITION
  // naming `substring`.
  void ExpectRefused(int layer, const std::string& session, int64_t position,
                     const std::string& substring, int tokens = 1, bool draft = false) {
    const oracle::Inputs inputs = MakeRandomInputs(options_, {tokens}, seed_ + 17, false);
    gdn::v1::ForwardRequest request =
        BuildForwardRequest(options_, layer, {{session, position}}, inputs);
    request.mutable_sequences(0)->set_draft(draft);
    gdn::v1::ForwardResponse response;
    const grpc::Status status = harness_->Forward(request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << position << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), ::testing::HasSubstr(substring)) << position;
  }

  grpc::Status CommitDraft(const std::string& session, int64_t position,
                           std::vector<int32_t> layers, gdn::v1::CommitDraftResponse* out) {
    grpc::ClientContext context;
    gdn::v1::CommitDraftRequest request;
    request.set_session_id(session);
    request.set_position(position);
    for (int32_t layer : layers) request.add_layers(layer);
    return harness_->stub().CommitDraft(&context, request, out);
  }

  // Every acceptance count k = 1..T for T = 2..8 on session "a", while "b"
  // drafts other lengths in the same calls and accepts other counts, and an
  // ordinary call on the other layer runs between every draft and its
  // acceptance. o of every call, drafts included, matches the oracle, so each
  // accepted state is exactly the state after its k-th draft token.
  void RunEveryAcceptanceCount() {
    SCOPED_TRACE(::testing::Message() << "seed " << seed_);
    harness_->CreateSession("a");
    harness_->CreateSession("b");
    int64_t pa[2] = {0, 0}, pb[2] = {0, 0};
    Call(0, {{"a", 0, 5, false}, {"b", 0, 3, false}});  // some history first
    Call(1, {{"a", 0, 2, false}, {"b", 0, 4, false}});
    pa[0] = 5, pb[0] = 3, pa[1] = 2, pb[1] = 4;
    for (int tokens = 2; tokens <= kMaxDecodeTokens; ++tokens) {
      for (int k = 1; k <= tokens; ++k) {
        SCOPED_TRACE(absl::StrCat("T ", tokens, " k ", k));
        const int layer = (tokens + k) % 2, other = 1 - layer;
        const int b_tokens = 2 + (tokens + 3 * k) % (kMaxDecodeTokens - 1);
        const int b_k = 1 + (5 * k) % b_tokens;
        Call(layer, {{"a", pa[layer], tokens, true}, {"b", pb[layer], b_tokens, true}});
        if (k == 1) {
          const gdn::v1::DescribeSessionResponse d = harness_->Describe("a");
          EXPECT_EQ(d.layers(layer).draft_tokens(), tokens);
          EXPECT_EQ(d.layers(layer).position(), pa[layer] + tokens);
          EXPECT_EQ(d.layers(other).draft_tokens(), 0);
        }
        Call(other, {{"a", pa[other], 1, false}});  // interleaved, other layer
        ++pa[other];
        Accept("a", layer, k);
        Accept("b", layer, b_k);
        pa[layer] += k;
        pb[layer] += b_k;
        // The accepting call: an ordinary decode for "a", a prefill-sized
        // call for "b" (its own kernel path).
        Call(layer, {{"a", pa[layer], 1, false}, {"b", pb[layer], 3 + k, false}});
        ++pa[layer];
        pb[layer] += 3 + k;
      }
    }
    const gdn::v1::DescribeSessionResponse d = harness_->Describe("b");
    EXPECT_EQ(d.layers(0).draft_tokens(), 0);
    EXPECT_EQ(d.layers(0).position(), pb[0]);
    EXPECT_EQ(d.layers(1).position(), pb[1]);
  }

  uint64_t seed_ = 0;
  int calls_ = 0;
  std::unique_ptr<gdn::testing::ServerHarness> harness_;
  GdnOptions options_;
  std::unique_ptr<OracleModel> oracle_;
  std::map<std::pair<std::string, int>, oracle::Inputs> drafts_;
};

}  // namespace gdn::testing

#endif  // GDN_TESTS_SERVER_RPC_DRAFT_FORWARD_FIXTURE_H_
