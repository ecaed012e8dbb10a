// gdn-echo in process, both modes, on TCP and on a Unix socket: Forward
// answers o of [T, Hv, V] in the activation dtype with positions + tokens,
// through the C++ client's typed Forward, through the raw path (ForwardRaw)
// and over ForwardStream; the two modes answer the same bytes; the session
// methods, GetServerInfo and health answer as documented.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <unistd.h>

#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "bench/echo/echo_server.h"
#include "bench/echo/min_client_request.h"
#include "bench/echo/proto_echo_response.h"
#include "bench/echo/raw_echo_response.h"
#include "client/gdn_client.h"
#include "client/raw_forward.h"
#include "client/raw_unary_call.h"
#include "gtest/gtest.h"
#include "proto/forward_wire.h"

namespace gdn::echo {

// Test names and failure messages say "proto" / "raw" (found by ADL).
void PrintTo(EchoMode mode, std::ostream* os) { *os << EchoModeName(mode); }

namespace {

// A small shape: Hqk 2, Hv 4, K 16, V 8.
EchoOptions Small(EchoMode mode, DType dtype = DType::kBF16) {
  EchoOptions o;
  o.mode = mode;
  o.layers = 3;
  o.qk_heads = 2;
  o.v_heads = 4;
  o.head_dim_k = 16;
  o.head_dim_v = 8;
  o.activation_dtype = dtype;
  o.transport.max_message_bytes = 8 << 20;  // the raw mode's static buffer
  return o;
}

std::unique_ptr<EchoServer> StartOrDie(const EchoOptions& o) {
  absl::StatusOr<std::unique_ptr<EchoServer>> s = EchoServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

class EchoServerTest : public ::testing::TestWithParam<EchoMode> {};

TEST_P(EchoServerTest, TypedForwardThroughTheClient) {
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    std::unique_ptr<EchoServer> echo = StartOrDie(Small(GetParam(), dtype));
    ASSERT_NE(echo, nullptr);
    client::GdnClient client(echo->address());
    const std::vector<client::SequenceTokens> seqs = {{"a", 0, 3}, {"b", 17, 1}, {"c", 5, 2}};
    const int64_t t = 6;
    client::ForwardInputs in;
    in.q.assign(t * 2 * 16, 0.5f);
    in.k = in.q;
    in.v.assign(t * 4 * 8, 0.25f);
    in.g.assign(t * 4, -0.1f);
    in.beta.assign(t * 4, 0.5f);
    absl::StatusOr<client::ForwardOutputs> out = client.Forward(/*layer=*/2, seqs, in);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->o.size(), static_cast<size_t>(t * 4 * 8));
    EXPECT_EQ(out->positions, (std::vector<int64_t>{3, 18, 7}));
  }
}

TEST_P(EchoServerTest, RawForwardAndStream) {
  std::unique_ptr<EchoServer> echo = StartOrDie(Small(GetParam()));
  ASSERT_NE(echo, nullptr);
  client::GdnClient client(echo->address());
  absl::StatusOr<v1::ServerInfoResponse> info = client.GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  const MinRequestShape shape{5, 3, 1};
  absl::StatusOr<grpc::ByteBuffer> request = BuildMinRequest(info->config(), shape);
  ASSERT_TRUE(request.ok()) << request.status();
  absl::StatusOr<client::RawForwardResponse> r =
      client::ForwardRaw(client.channel(), *request, client::RawCallOptionsFor(client.options(), ""));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->fields.o.dtype, v1::DTYPE_BF16);
  EXPECT_EQ(r->fields.o.shape, (std::vector<int64_t>{15, 4, 8}));
  EXPECT_EQ(static_cast<int64_t>(r->fields.o.data.size), ExpectedOutputBytes(info->config(), shape));
  EXPECT_EQ(r->fields.positions, (std::vector<int64_t>{3, 3, 3, 3, 3}));

  // ForwardStream: in order, request ids echoed.
  std::unique_ptr<client::ForwardStream> stream = client.OpenForwardStream();
  for (int i = 1; i <= 3; ++i) {
    v1::ForwardRequest req;
    v1::SequenceSpec* s = req.add_sequences();
    s->set_session_id("s");
    s->set_position(10 * i);
    s->set_num_tokens(i);
    ASSERT_TRUE(stream->Send(req).ok());
  }
  for (int i = 1; i <= 3; ++i) {
    absl::StatusOr<v1::ForwardResponse> resp = stream->Receive();
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_EQ(resp->request_id(), static_cast<uint64_t>(i));
    EXPECT_EQ(resp->positions(0), 11 * i);
    EXPECT_EQ(resp->o().data().size(), static_cast<size_t>(i * 4 * 8 * 2));
  }
  EXPECT_TRUE(stream->Finish().ok());
}

// A client may send several multi-MiB requests before reading any answer (a
// call split in parts, pipelined): the echo reads ahead as the server does,
// so neither end waits on the other. 6 requests of ~4.5 MiB (20000 tokens)
// are more than gRPC moves without reads on both sides.
TEST_P(EchoServerTest, PipelinedLargeRequestsOnOneStream) {
  std::unique_ptr<EchoServer> echo = StartOrDie(Small(GetParam()));
  ASSERT_NE(echo, nullptr);
  client::GdnClientOptions options;
  options.deadline = absl::Seconds(30);  // a stall fails the test instead of hanging it
  client::GdnClient client(echo->address(), options);
  std::unique_ptr<client::ForwardStream> stream = client.OpenForwardStream();
  constexpr int kRequests = 6;
  constexpr int64_t kTokens = 20000;
  for (int i = 0; i < kRequests; ++i) {
    v1::ForwardRequest req;
    v1::SequenceSpec* s = req.add_sequences();
    s->set_session_id("s");
    s->set_position(kTokens * i);
    s->set_num_tokens(kTokens);
    req.mutable_q()->mutable_data()->assign(kTokens * 2 * 16 * 2, '\1');
    req.mutable_k()->mutable_data()->assign(kTokens * 2 * 16 * 2, '\1');
    req.mutable_v()->mutable_data()->assign(kTokens * 4 * 8 * 2, '\1');
    ASSERT_TRUE(stream->Send(std::move(req)).ok()) << "request " << i;
  }
  for (int i = 0; i < kRequests; ++i) {
    absl::StatusOr<v1::ForwardResponse> resp = stream->Receive();
    ASSERT_TRUE(resp.ok()) << "answer " << i << ": " << resp.status();
    EXPECT_EQ(resp->request_id(), static_cast<uint64_t>(i + 1));
    EXPECT_EQ(resp->positions(0), kTokens * (i + 1));
    EXPECT_EQ(resp->o().data().size(), static_cast<size_t>(kTokens * 4 * 8 * 2));
  }
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_P(EchoServerTest, SessionMethodsInfoAndHealth) {
  std::unique_ptr<EchoServer> echo = StartOrDie(Small(GetParam()));
  ASSERT_NE(echo, nullptr);
  client::GdnClient client(echo->address());
  absl::StatusOr<v1::ServerInfoResponse> info = client.GetServerInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->backend(), "echo");
  EXPECT_EQ(info->device(), "echo (no engine)");
  EXPECT_EQ(info->version(), std::string("echo/") + EchoModeName(GetParam()));
  EXPECT_EQ(info->config().num_layers(), 3);
  EXPECT_EQ(info->config().num_v_heads(), 4);
  EXPECT_EQ(info->limits().max_message_bytes(), 8 << 20);
  EXPECT_EQ(info->limits().max_batch_tokens(), 8192);
  EXPECT_EQ(*client.CreateSession("tenant/x"), "tenant/x");
  absl::StatusOr<std::string> fresh = client.CreateSession();
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->empty());
  EXPECT_NE(*fresh, *client.CreateSession());
  EXPECT_EQ(*client.ForkSession("tenant/x", "tenant/y"), "tenant/y");
  EXPECT_TRUE(client.CloseSession("anything").ok());
  EXPECT_TRUE(client.DescribeSession("anything").ok());
  EXPECT_TRUE(client.ListSessions().ok());

  // grpc.health.v1.Health/Check of the whole server: an empty request; the
  // answer is HealthCheckResponse{status: SERVING (1)}, i.e. bytes 08 01 (its
  // proto is not installed with Debian's gRPC).
  grpc::ClientContext context;
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1), response;
  ASSERT_TRUE(client::RawUnaryCall(client.channel(), "/grpc.health.v1.Health/Check", &context,
                                   request, &response)
                  .ok());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01"));
}

TEST_P(EchoServerTest, UnixSocket) {
  EchoOptions o = Small(GetParam());
  o.listen = "unix:" + ::testing::TempDir() + "/gdn_echo_" + std::to_string(getpid()) + ".sock";
  std::unique_ptr<EchoServer> echo = StartOrDie(o);
  ASSERT_NE(echo, nullptr);
  EXPECT_EQ(echo->address(), o.listen);
  client::GdnClient client(echo->address());
  absl::StatusOr<v1::ServerInfoResponse> info = client.GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  absl::StatusOr<grpc::ByteBuffer> request = BuildMinRequest(info->config(), {2, 1, 0});
  ASSERT_TRUE(request.ok());
  EXPECT_TRUE(client::ForwardRaw(client.channel(), *request,
                                 client::RawCallOptionsFor(client.options(), ""))
                  .ok());
}

INSTANTIATE_TEST_SUITE_P(Modes, EchoServerTest, ::testing::Values(EchoMode::kProto, EchoMode::kRaw),
                         [](const ::testing::TestParamInfo<EchoMode>& p) {
                           return std::string(EchoModeName(p.param));
                         });

// The two modes' answers are the same message, byte for byte.
TEST(EchoResponsesTest, RawAndProtoAnswerTheSameBytes) {
  std::mt19937_64 rng(std::random_device{}());
  const EchoOptions o = Small(EchoMode::kRaw);
  const v1::LayerConfig config = EchoLayerConfig(o);
  PrepareZeroBuffer(1 << 20);
  for (int i = 0; i < 20; ++i) {
    v1::ForwardRequest request;
    request.set_layer(static_cast<int>(rng() % 3));
    request.set_request_id(rng() % 2 ? 0 : rng());
    const int n = 1 + static_cast<int>(rng() % 5);
    for (int s = 0; s < n; ++s) {
      v1::SequenceSpec* spec = request.add_sequences();
      spec->set_session_id("s" + std::to_string(s));
      spec->set_position(static_cast<int64_t>(rng() % 1000));
      spec->set_num_tokens(1 + static_cast<int>(rng() % 40));
    }
    const std::string bytes = request.SerializeAsString();
    grpc::Slice slice(bytes);
    grpc::ByteBuffer in(&slice, 1);
    grpc::ByteBuffer raw;
    ASSERT_TRUE(RawEchoResponse(in, config, &raw).ok());
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(raw.Dump(&slices).ok());
    std::string raw_bytes;
    for (const grpc::Slice& s : slices) raw_bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    v1::ForwardResponse proto;
    ProtoEchoResponse(request, config, &proto);
    EXPECT_EQ(raw_bytes, proto.SerializeAsString());
  }
  grpc::Slice junk(std::string("\xff\xff\xff"));
  grpc::ByteBuffer bad(&junk, 1);
  grpc::ByteBuffer out;
  EXPECT_TRUE(absl::IsInvalidArgument(RawEchoResponse(bad, config, &out)));
}

TEST(EchoOptionsTest, BadOptionsAreRefused) {
  EchoOptions o;
  o.v_heads = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(EchoServer::Start(o).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseEchoMode("protobuf").status()));
}

}  // namespace
}  // namespace gdn::echo
