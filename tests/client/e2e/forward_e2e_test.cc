// End to end: outputs and states of a real gdn-server (CPU backend) against
// the float64 oracle, for several sessions over several layers with prefill
// and decode interleaved, in fp32 and bf16 activations and fused gating.
#include <string>
#include <vector>

#include "tests/client/e2e/e2e_fixture.h"
#include "tests/client/e2e/metrics_scrape.h"

namespace gdn::e2e {
namespace {

using client::Session;

class ForwardE2eTest : public E2eTest {
 protected:
  // Three sessions driven the way a model runner would: prefills of awkward
  // lengths (1, 7, 79, 130), batched decodes, a mixed prefill + decode call,
  // speculative multi-token decodes, layers in varying orders, one layer left
  // unwritten.
  void RunInterleavedScenario() {
    absl::StatusOr<Session> a = Session::Create(client_.get(), "alpha");
    absl::StatusOr<Session> b = Session::Create(client_.get());
    absl::StatusOr<Session> c = Session::Create(client_.get(), "gamma");
    ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status() << c.status();
    for (Session* s : {&*a, &*b, &*c}) model_->AddSession(s->id());
    uint64_t seed = 100;
    // Prefill alpha (79 tokens) on every layer, beta (7) on layers 2, 0.
    for (int layer = 0; layer < 3; ++layer) {
      ASSERT_NO_FATAL_FAILURE(ForwardChecked(layer, {&*a}, {79}, ++seed));
    }
    for (int layer : {2, 0}) ASSERT_NO_FATAL_FAILURE(ForwardChecked(layer, {&*b}, {7}, ++seed));
    // Batched decode of alpha and beta.
    for (int step = 0; step < 3; ++step) {
      for (int layer : {0, 2}) {
        ASSERT_NO_FATAL_FAILURE(ForwardChecked(layer, {&*a, &*b}, {1, 1}, ++seed));
      }
    }
    // A mixed call: gamma's prefill (130) with alpha's decode and beta's
    // speculative 3-token step.
    for (int layer = 0; layer < 3; ++layer) {
      ASSERT_NO_FATAL_FAILURE(ForwardChecked(layer, {&*c, &*a, &*b}, {130, 1, 3}, ++seed));
    }
    // Gamma decodes alone, then a 1-token "prefill" of beta's layer 1.
    for (int step = 0; step < 2; ++step) {
      for (int layer = 2; layer >= 0; --layer) {
        ASSERT_NO_FATAL_FAILURE(ForwardChecked(layer, {&*c}, {1}, ++seed));
      }
    }
    ASSERT_NO_FATAL_FAILURE(ForwardChecked(1, {&*b, &*c}, {1, 8}, ++seed));
    for (Session* s : {&*a, &*b, &*c}) ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch(s->id()));
    // Describe agrees with the positions the sessions tracked.
    for (Session* s : {&*a, &*b, &*c}) {
      absl::StatusOr<v1::DescribeSessionResponse> d = client_->DescribeSession(s->id());
      ASSERT_TRUE(d.ok()) << d.status();
      for (const v1::LayerStateInfo& l : d->layers()) {
        EXPECT_EQ(l.position(), s->position(l.layer())) << s->id() << " layer " << l.layer();
        EXPECT_EQ(l.has_state(), model_->Position(s->id(), l.layer()) > 0);
      }
    }
  }
};

TEST_F(ForwardE2eTest, Fp32ActivationsMatchOracle) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  EXPECT_EQ(info_.backend(), "cpu");
  EXPECT_EQ(info_.config().num_layers(), 3);
  EXPECT_EQ(info_.config().activation_dtype(), v1::DTYPE_FP32);
  RunInterleavedScenario();
}

TEST_F(ForwardE2eTest, Bf16ActivationsMatchOracle) {
  ASSERT_NO_FATAL_FAILURE(StartServer({{"activation_dtype", "bf16"}}));
  EXPECT_EQ(info_.config().activation_dtype(), v1::DTYPE_BF16);
  RunInterleavedScenario();
}

TEST_F(ForwardE2eTest, FusedGatingGqaMatchesOracle) {
  // Fused gating with Hv = 2 Hqk and K != V.
  ASSERT_NO_FATAL_FAILURE(StartServer({{"gating", "fused"}, {"head_dim_v", "128"}}));
  EXPECT_EQ(info_.config().gating_mode(), "fused");
  absl::StatusOr<Session> s = Session::Create(client_.get());
  ASSERT_TRUE(s.ok()) << s.status();
  model_->AddSession(s->id());
  ASSERT_NO_FATAL_FAILURE(ForwardChecked(1, {&*s}, {17}, 7));
  ASSERT_NO_FATAL_FAILURE(ForwardChecked(1, {&*s}, {1}, 8));
  ASSERT_NO_FATAL_FAILURE(ForwardChecked(0, {&*s}, {3}, 9));
  ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch(s->id()));
}

// A prefill larger than the client's message size goes out as several calls
// in order and computes exactly what one call would.
TEST_F(ForwardE2eTest, PrefillLargerThanMessageIsSplit) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  client::GdnClientOptions small;
  small.max_message_bytes = 256 * 1024;  // ~70 fp32 tokens of this shape
  client_ = std::make_unique<client::GdnClient>(server_->grpc_address(), small);
  const std::string before = ScrapeMetrics();
  absl::StatusOr<Session> s = Session::Create(client_.get());
  absl::StatusOr<Session> t = Session::Create(client_.get());
  ASSERT_TRUE(s.ok() && t.ok());
  model_->AddSession(s->id());
  model_->AddSession(t->id());
  ASSERT_NO_FATAL_FAILURE(ForwardChecked(0, {&*s, &*t}, {300, 150}, 11));
  ASSERT_NO_FATAL_FAILURE(ForwardChecked(0, {&*s, &*t}, {1, 1}, 12));
  ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch(s->id()));
  ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch(t->id()));
  // 450 tokens of ~2 KiB each (q, k, v fp32 + g, beta) need at least 4
  // messages of 256 KiB; plus the decode call.
  const std::string after = ScrapeMetrics();
  EXPECT_GE(SumSamples(after, "gdn_requests_total", {{"method", "Forward"}, {"code", "OK"}}) -
                SumSamples(before, "gdn_requests_total", {{"method", "Forward"}, {"code", "OK"}}),
            4 + 1);
}

}  // namespace
}  // namespace gdn::e2e
