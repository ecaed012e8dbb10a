// End to end: every bad input gets its gRPC code and leaves the server's
// states unchanged — after each rejected call the next good call still
// matches the float64 oracle, and the exported states do too.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/dtype_convert.h"
#include "proto/tensor_codec.h"
#include "tests/client/e2e/e2e_fixture.h"

namespace gdn::e2e {
namespace {

using client::Session;

class ErrorsE2eTest : public E2eTest {
 protected:
  // A well-formed request for `session` at its current position of `layer`.
  v1::ForwardRequest GoodRequest(const Session& session, int layer, int tokens, uint64_t seed) {
    absl::StatusOr<v1::ForwardRequest> r = client_->BuildForwardRequest(
        layer, {session.Next(layer, tokens)},
        OracleModel::ToClientInputs(model_->MakeInputs({tokens}, seed)));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::ForwardRequest();
  }

  void ExpectCode(const v1::ForwardRequest& r, absl::StatusCode code, const std::string& what) {
    absl::StatusOr<v1::ForwardResponse> response = client_->Forward(r);
    EXPECT_EQ(response.status().code(), code) << what << ": " << response.status();
  }

  // Writes every layer of a fresh session so that a corrupted write would show.
  void SetUpSession() {
    ASSERT_NO_FATAL_FAILURE(StartServer());
    absl::StatusOr<Session> s = Session::Create(client_.get(), "victim");
    ASSERT_TRUE(s.ok()) << s.status();
    session_ = std::make_unique<Session>(*std::move(s));
    model_->AddSession("victim");
    for (int layer = 0; layer < 3; ++layer) {
      ASSERT_NO_FATAL_FAILURE(ForwardChecked(layer, {session_.get()}, {9}, 40 + layer));
    }
  }

  // The state is still what the model says, and a good call still matches.
  void ExpectUnchanged(uint64_t seed) {
    ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch("victim"));
    ASSERT_NO_FATAL_FAILURE(ForwardChecked(1, {session_.get()}, {2}, seed));
  }

  std::unique_ptr<Session> session_;
};

TEST_F(ErrorsE2eTest, BadSessionsAndLayers) {
  ASSERT_NO_FATAL_FAILURE(SetUpSession());
  v1::ForwardRequest r = GoodRequest(*session_, 1, 2, 1);
  r.mutable_sequences(0)->set_session_id("no-such-session");
  ExpectCode(r, absl::StatusCode::kNotFound, "unknown session");

  for (int layer : {-1, 3, 1000}) {
    r = GoodRequest(*session_, 1, 2, 2);
    r.set_layer(layer);
    ExpectCode(r, absl::StatusCode::kInvalidArgument, "layer " + std::to_string(layer));
  }
  r = GoodRequest(*session_, 1, 2, 3);
  r.clear_sequences();
  ExpectCode(r, absl::StatusCode::kInvalidArgument, "no sequences");

  EXPECT_EQ(client_->CreateSession("victim").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(client_->CloseSession("nobody").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->DescribeSession("nobody").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->ForkSession("nobody").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->ForkSession("victim", "victim").status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(client_->ExportSession("nobody").status().code(), absl::StatusCode::kNotFound);
  ExpectUnchanged(4);
}

TEST_F(ErrorsE2eTest, WrongShapesDtypesAndTokenCounts) {
  ASSERT_NO_FATAL_FAILURE(SetUpSession());
  const int hqk = options_.shape.num_qk_heads, k = options_.shape.head_dim_k;
  const int hv = options_.shape.num_v_heads;
  // q with the wrong inner size.
  v1::ForwardRequest r = GoodRequest(*session_, 1, 2, 10);
  std::vector<float> ones(2 * hqk * (k / 2), 0.5f);
  *r.mutable_q() = wire::MakeTensor(DType::kF32, {2, hqk, k / 2}, ones.data());
  ExpectCode(r, absl::StatusCode::kInvalidArgument, "q shape");
  // v as bf16 on an fp32 server.
  r = GoodRequest(*session_, 1, 2, 11);
  std::vector<float> v = wire::ToFloats(r.v());
  *r.mutable_v() = wire::MakeTensor(DType::kBF16,
                                    {r.v().shape().begin(), r.v().shape().end()}, v.data());
  ExpectCode(r, absl::StatusCode::kInvalidArgument, "v dtype");
  // Truncated data.
  r = GoodRequest(*session_, 1, 2, 12);
  r.mutable_k()->mutable_data()->resize(r.k().data().size() - 4);
  ExpectCode(r, absl::StatusCode::kInvalidArgument, "k bytes");
  // num_tokens disagreeing with the tensors' T, and zero tokens.
  r = GoodRequest(*session_, 1, 2, 13);
  r.mutable_sequences(0)->set_num_tokens(3);
  ExpectCode(r, absl::StatusCode::kInvalidArgument, "num_tokens 3 for T = 2");
  r.mutable_sequences(0)->set_num_tokens(0);
  ExpectCode(r, absl::StatusCode::kInvalidArgument, "num_tokens 0");
  // Missing beta; a fused-gating field on a direct server.
  r = GoodRequest(*session_, 1, 2, 14);
  r.clear_beta();
  ExpectCode(r, absl::StatusCode::kInvalidArgument, "no beta");
  r = GoodRequest(*session_, 1, 2, 15);
  std::vector<float> a(2 * hv, 0.1f);
  *r.mutable_a() = wire::MakeTensor(DType::kF32, {2, hv}, a.data());
  ExpectCode(r, absl::StatusCode::kInvalidArgument, "a with direct gating");
  // The same session twice in one call.
  absl::StatusOr<v1::ForwardRequest> twice = client_->BuildForwardRequest(
      1, {session_->Next(1, 1), session_->Next(1, 1)},
      OracleModel::ToClientInputs(model_->MakeInputs({1, 1}, 16)));
  ASSERT_TRUE(twice.ok());
  ExpectCode(*twice, absl::StatusCode::kInvalidArgument, "session twice");
  ExpectUnchanged(17);
}

TEST_F(ErrorsE2eTest, NonFiniteAndOutOfRangeValues) {
  ASSERT_NO_FATAL_FAILURE(SetUpSession());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* field;
    float value;
  };
  for (const Case& c : {Case{"q", nan}, Case{"k", inf}, Case{"v", -inf}, Case{"g", nan},
                        Case{"beta", inf}, Case{"g", 0.5f}, Case{"beta", 1.5f},
                        Case{"beta", -0.25f}}) {
    v1::ForwardRequest r = GoodRequest(*session_, 1, 3, 20);
    v1::Tensor* t = c.field == std::string("q")    ? r.mutable_q()
                    : c.field == std::string("k")  ? r.mutable_k()
                    : c.field == std::string("v")  ? r.mutable_v()
                    : c.field == std::string("g")  ? r.mutable_g()
                                                   : r.mutable_beta();
    // Poison one element in the middle (the last token's row).
    std::vector<float> values = wire::ToFloats(*t);
    values[values.size() - 2] = c.value;
    DType dtype;
    ASSERT_TRUE(wire::FromProtoDType(t->dtype(), &dtype));
    *t = wire::MakeTensor(dtype, {t->shape().begin(), t->shape().end()}, values.data());
    ExpectCode(r, absl::StatusCode::kInvalidArgument,
               std::string(c.field) + " = " + std::to_string(c.value));
  }
  ExpectUnchanged(21);
}

TEST_F(ErrorsE2eTest, WrongPositionIsFailedPreconditionAndSessionResyncs) {
  ASSERT_NO_FATAL_FAILURE(SetUpSession());
  // A position already consumed (a retry of applied work) is refused.
  for (int64_t delta : {-1, -9}) {
    v1::ForwardRequest r = GoodRequest(*session_, 1, 2, 30);
    r.mutable_sequences(0)->set_position(session_->position(1) + delta);
    ExpectCode(r, absl::StatusCode::kFailedPrecondition, "position delta " + std::to_string(delta));
  }
  // A position ahead waits (parked) for the gap to fill; with nothing to fill
  // it, the call ends at its deadline and is dropped: it must not run later
  // when the gap does fill (ExpectUnchanged's good call fills it).
  {
    client::GdnClientOptions short_deadline;
    short_deadline.deadline = absl::Milliseconds(300);
    client::GdnClient impatient(server_->grpc_address(), short_deadline);
    v1::ForwardRequest r = GoodRequest(*session_, 1, 2, 30);
    r.mutable_sequences(0)->set_position(session_->position(1) + 2);
    EXPECT_EQ(impatient.Forward(r).status().code(), absl::StatusCode::kDeadlineExceeded);
    absl::SleepFor(absl::Milliseconds(50));  // the server notices the expiry
  }
  ExpectUnchanged(34);
  // A second Session object on the same id moves the position on; the first
  // one's next call is stale, fails, resyncs and then succeeds.
  absl::StatusOr<Session> other = Session::Attach(client_.get(), "victim");
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_NO_FATAL_FAILURE(ForwardChecked(1, {&*other}, {4}, 31));
  const int64_t stale = session_->position(1);
  absl::StatusOr<std::vector<float>> o =
      session_->Forward(1, 1, OracleModel::ToClientInputs(model_->MakeInputs({1}, 32)));
  EXPECT_EQ(o.status().code(), absl::StatusCode::kFailedPrecondition) << o.status();
  EXPECT_EQ(session_->position(1), stale + 4);  // resynced from DescribeSession
  ExpectUnchanged(33);
}

TEST_F(ErrorsE2eTest, FullCacheIsResourceExhaustedAndKeepsStates) {
  // Page: Hv 4 x 64 x 64 fp32 = 64 KiB. Two device pages and one host page.
  ASSERT_NO_FATAL_FAILURE(StartServer({{"device_state_budget", "128KiB"},
                                       {"host_state_budget", "64KiB"}}));
  const int64_t pages = info_.limits().device_pages() + info_.limits().host_pages();
  ASSERT_GT(pages, 0);
  ASSERT_LE(pages, 4);
  std::vector<std::unique_ptr<Session>> sessions;
  absl::Status last;
  int written = 0;
  // Write one layer of a new session each time until the cache is full.
  for (int i = 0; i < pages + 2 && last.ok(); ++i) {
    absl::StatusOr<Session> s = Session::Create(client_.get(), "s" + std::to_string(i));
    ASSERT_TRUE(s.ok()) << s.status();
    sessions.push_back(std::make_unique<Session>(*std::move(s)));
    model_->AddSession(sessions.back()->id());
    const oracle::Inputs in = model_->MakeInputs({5}, 50 + i);
    absl::StatusOr<std::vector<float>> o =
        sessions.back()->Forward(0, 5, OracleModel::ToClientInputs(in));
    last = o.status();
    if (o.ok()) {
      model_->Forward(0, {sessions.back()->id()}, in);
      ++written;
    }
  }
  EXPECT_EQ(last.code(), absl::StatusCode::kResourceExhausted) << last;
  EXPECT_EQ(written, pages);
  // Nothing stored was dropped, the failed session is still at position 0.
  for (const auto& s : sessions) ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch(s->id()));
  EXPECT_EQ(sessions.back()->position(0), 0);
  // Closing one session frees its page: the failed write now succeeds.
  ASSERT_TRUE(sessions.front()->Close().ok());
  model_->Close(sessions.front()->id());
  ASSERT_NO_FATAL_FAILURE(ForwardChecked(0, {sessions.back().get()}, {5}, 70));
  ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch(sessions.back()->id()));
}

// Issue 21, defect 2: with both tiers full, a session whose page sits on the
// host tier needs no net new page to advance: the server swaps it with an
// idle device page instead of answering RESOURCE_EXHAUSTED, and every stored
// state stays the oracle's.
TEST_F(ErrorsE2eTest, FullCacheStillAdvancesSessionsOnTheHostTier) {
  // Page: Hv 4 x 64 x 64 fp32 = 64 KiB. Two device pages and two host pages.
  ASSERT_NO_FATAL_FAILURE(StartServer({{"device_state_budget", "128KiB"},
                                       {"host_state_budget", "128KiB"}}));
  const int64_t pages = info_.limits().device_pages() + info_.limits().host_pages();
  ASSERT_EQ(info_.limits().host_pages(), 2);
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < pages; ++i) {
    absl::StatusOr<Session> s = Session::Create(client_.get(), "h" + std::to_string(i));
    ASSERT_TRUE(s.ok()) << s.status();
    sessions.push_back(std::make_unique<Session>(*std::move(s)));
    model_->AddSession(sessions.back()->id());
    ASSERT_NO_FATAL_FAILURE(ForwardChecked(0, {sessions.back().get()}, {5}, 80 + i));
  }
  // Both tiers full; the first sessions went to the host tier. Each session
  // advances, round after round, wherever its page is.
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < sessions.size(); ++i) {
      ASSERT_NO_FATAL_FAILURE(
          ForwardChecked(0, {sessions[i].get()}, {2}, 100 + 10 * round + i));
    }
  }
  for (const auto& s : sessions) ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch(s->id()));
  // A new session still needs a net new page: that is RESOURCE_EXHAUSTED.
  absl::StatusOr<Session> extra = Session::Create(client_.get(), "extra");
  ASSERT_TRUE(extra.ok()) << extra.status();
  model_->AddSession("extra");
  const oracle::Inputs in = model_->MakeInputs({5}, 200);
  EXPECT_EQ(extra->Forward(0, 5, OracleModel::ToClientInputs(in)).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace gdn::e2e
