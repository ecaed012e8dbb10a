// ForwardInParts (client/forward_in_parts.h) against an in-process CPU
// server (tests/client/bench/bench_server.h: Hqk 1, Hv 2, K = V = 64, fp32):
// a prefill of three sessions cut into ~8 parts gives, over three
// connections, the o and positions it gives over one (bitwise: the same
// pieces in the same order on the server) and, within fp32 rounding, those
// of the whole call; a wrong o buffer is refused with nothing sent; a part
// naming an unknown session fails naming its part.
#include "client/forward_in_parts.h"

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "client/gdn_client.h"
#include "client/raw_forward.h"
#include "gtest/gtest.h"
#include "tests/client/bench/bench_server.h"

namespace gdn::client {
namespace {

constexpr int kQkHeads = 1, kVHeads = 2, kDim = 64;
const std::vector<int> kLengths = {100, 30, 90};  // ~1 KiB a token

// Inputs of every token, fp32, as the request's tensors reference them.
struct Inputs {
  std::vector<float> q, k, v, g, beta;
  explicit Inputs(int tokens, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> unit(0.05f, 0.95f);
    for (auto* t : {&q, &k}) t->resize(static_cast<size_t>(tokens) * kQkHeads * kDim);
    v.resize(static_cast<size_t>(tokens) * kVHeads * kDim);
    for (auto* t : {&q, &k, &v}) {
      for (float& x : *t) x = normal(rng);
    }
    g.resize(static_cast<size_t>(tokens) * kVHeads);
    beta.resize(g.size());
    for (float& x : g) x = -0.1f * unit(rng);  // mild decay
    for (float& x : beta) x = unit(rng);
  }
};

wire::TensorParts Tensor(const std::vector<float>& data, std::vector<int64_t> shape) {
  wire::TensorParts t;
  t.dtype = v1::DTYPE_FP32;
  t.shape = std::move(shape);
  t.data.push_back({data.data(), data.size() * sizeof(float), nullptr});
  return t;
}

wire::ForwardRequestParts Request(const Inputs& x, const std::vector<std::string>& sessions) {
  wire::ForwardRequestParts r;
  r.layer = 1;
  int64_t tokens = 0;
  for (size_t i = 0; i < sessions.size(); ++i) {
    r.sequences.push_back({sessions[i], 0, kLengths[i]});
    tokens += kLengths[i];
  }
  r.q = Tensor(x.q, {tokens, kQkHeads, kDim});
  r.k = Tensor(x.k, {tokens, kQkHeads, kDim});
  r.v = Tensor(x.v, {tokens, kVHeads, kDim});
  r.g = Tensor(x.g, {tokens, kVHeads});
  r.beta = Tensor(x.beta, {tokens, kVHeads});
  return r;
}

class ForwardInPartsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = bench::testing::StartTinyServer();
    ASSERT_NE(server_, nullptr);
    options_.retry.max_attempts = 1;
    client_ = std::make_unique<GdnClient>(server_->grpc_address(), options_);
  }

  std::vector<std::string> NewSessions() {
    std::vector<std::string> ids;
    for (size_t i = 0; i < kLengths.size(); ++i) {
      absl::StatusOr<std::string> id = client_->CreateSession();
      EXPECT_TRUE(id.ok()) << id.status();
      ids.push_back(id.ok() ? *id : "");
    }
    return ids;
  }

  std::unique_ptr<ParallelForwardStreams> Streams(int n) {
    std::vector<std::shared_ptr<grpc::Channel>> channels{client_->channel()};
    for (int i = 1; i < n; ++i) {
      channels.push_back(MakeGdnChannel(server_->grpc_address(), options_, i));
    }
    return std::make_unique<ParallelForwardStreams>(channels, RawCallOptions{}, options_.retry,
                                                    nullptr);
  }

  std::unique_ptr<GdnServer> server_;
  GdnClientOptions options_;
  std::unique_ptr<GdnClient> client_;
};

int Tokens() {
  int t = 0;
  for (int n : kLengths) t += n;
  return t;
}

TEST_F(ForwardInPartsTest, OverThreeConnectionsAsOverOneAndAsTheWholeCall) {
  const Inputs x(Tokens(), std::random_device{}());
  const size_t o_bytes = x.v.size() * sizeof(float);
  constexpr int64_t kPartBytes = (64 << 10) + 30000;  // ~28 tokens a part

  // The whole call, one message.
  absl::StatusOr<RawForwardResponse> whole = ForwardRaw(
      client_->channel(), wire::EncodeForwardRequest(Request(x, NewSessions())), RawCallOptions{});
  ASSERT_TRUE(whole.ok()) << whole.status();
  std::vector<float> o_whole(x.v.size());
  ASSERT_EQ(whole->fields.o.data.size, o_bytes);
  whole->message.CopyTo(whole->fields.o.data, o_whole.data());

  std::vector<std::vector<float>> o(2, std::vector<float>(x.v.size()));
  for (int c : {0, 1}) {
    std::unique_ptr<ParallelForwardStreams> streams = Streams(c == 0 ? 1 : 3);
    std::vector<int64_t> positions;
    const absl::Status s = ForwardInParts(
        *streams, Request(x, NewSessions()), kPartBytes,
        absl::MakeSpan(reinterpret_cast<char*>(o[c].data()), o_bytes), &positions);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(positions, std::vector<int64_t>(kLengths.begin(), kLengths.end()));
    EXPECT_TRUE(streams->Finish().ok());
  }
  EXPECT_EQ(o[1], o[0]);  // the same pieces, applied in the same order
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < o_whole.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(o[1][i]) - o_whole[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(o_whole[i])));
  }
  EXPECT_LT(max_diff, 1e-4 * max_ref);  // chunk boundaries differ: fp32 rounding only
}

TEST_F(ForwardInPartsTest, AWrongOBufferIsRefusedAndAnUnknownSessionNamesItsPart) {
  const Inputs x(Tokens(), 7);
  std::unique_ptr<ParallelForwardStreams> streams = Streams(2);
  std::vector<float> o(x.v.size());
  std::vector<int64_t> positions;
  const std::vector<std::string> ids = NewSessions();
  absl::Status s = ForwardInParts(*streams, Request(x, ids), 100000,
                                  absl::MakeSpan(reinterpret_cast<char*>(o.data()), 100),
                                  &positions);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  for (const std::string& id : ids) {
    absl::StatusOr<v1::DescribeSessionResponse> d = client_->DescribeSession(id);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->layers(1).position(), 0);  // nothing sent
  }

  std::vector<std::string> unknown = ids;
  unknown[1] = "nobody-here";
  s = ForwardInParts(*streams, Request(x, unknown), 100000,
                     absl::MakeSpan(reinterpret_cast<char*>(o.data()), o.size() * sizeof(float)),
                     &positions);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find("of a split Forward"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace gdn::client
