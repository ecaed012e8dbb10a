// Forward through a same-host channel (OpenChannel, client/forward_channel.h),
// end to end on the cpu backend: o and the state after equal the Forward
// RPC's bit for bit, inline and with tensors and o in a SYSTEM region; bad
// requests get their code and change nothing; OpenChannel refuses what it
// cannot serve; a closed channel answers UNAVAILABLE.
#include <grpcpp/grpcpp.h>

#include <cstring>
#include <string>
#include <vector>

#include "client/forward_channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/server/regions/shm_object.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"
#include "tests/server/test_random.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;
using client::ForwardChannel;
using client::ForwardChannelOptions;
using gdn::testing::ShmObject;

grpc::ByteBuffer Encode(const gdn::v1::ForwardRequest& request) {
  grpc::Slice slice(request.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

std::string OBytes(const client::RawForwardResponse& r) {
  std::string out;
  r.message.ForEachPiece(r.fields.o.data, [&](const char* p, size_t n) { out.append(p, n); });
  return out;
}

class ChannelForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = gdn::testing::FreshSeed();
    ServerConfig config = gdn::testing::SmallServerConfig();
    config.max_channels = 2;
    harness_ = std::make_unique<gdn::testing::ServerHarness>(config);
    options_ = harness_->config().options;
  }

  std::unique_ptr<ForwardChannel> Open(const std::string& name, uint64_t response_capacity = 1
                                                                                          << 20) {
    ForwardChannelOptions o;
    o.slots = 2;
    o.request_capacity = 1 << 20;
    o.response_capacity = response_capacity;
    absl::StatusOr<std::unique_ptr<ForwardChannel>> c =
        ForwardChannel::Open(harness_->channel(), name, o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  gdn::v1::ForwardRequest Inline(const std::string& session, int64_t position, int tokens) {
    const oracle::Inputs inputs =
        gdn::testing::MakeRandomInputs(options_, {tokens}, seed_ + (++calls_) * 7919, false);
    return gdn::testing::BuildForwardRequest(options_, 0, {{session, position}}, inputs);
  }

  int64_t PositionOf(const std::string& session) {
    const gdn::v1::DescribeSessionResponse d = harness_->Describe(session);
    for (const auto& l : d.layers()) {
      if (l.layer() == 0) return l.position();
    }
    return 0;
  }

  grpc::Status OpenRaw(const std::string& name, const std::string& key, uint64_t bytes) {
    gdn::v1::OpenChannelRequest r;
    r.set_name(name);
    r.set_shm_key(key);
    r.set_byte_size(bytes);
    gdn::v1::OpenChannelResponse response;
    grpc::ClientContext context;
    return harness_->stub().OpenChannel(&context, r, &response);
  }

  uint64_t seed_ = 0;
  int calls_ = 0;
  std::unique_ptr<gdn::testing::ServerHarness> harness_;
  GdnOptions options_;
};

TEST_F(ChannelForwardTest, InlineCallsGiveTheRpcResultBitForBit) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  std::unique_ptr<ForwardChannel> ch = Open("c");
  ASSERT_NE(ch, nullptr);
  const std::string a = harness_->CreateSession("");
  const std::string b = harness_->CreateSession("");
  int64_t position = 0;
  for (int tokens : {1, 7, 130, 1, 3}) {  // decode, prefill (chunked), decode
    gdn::v1::ForwardRequest request = Inline(a, position, tokens);
    absl::StatusOr<client::RawForwardResponse> got = ch->Forward(1, Encode(request));
    ASSERT_TRUE(got.ok()) << got.status();
    request.mutable_sequences(0)->set_session_id(b);
    gdn::v1::ForwardResponse want;
    ASSERT_TRUE(harness_->Forward(request, &want).ok());
    ASSERT_EQ(OBytes(*got), want.o().data()) << tokens << " tokens";
    ASSERT_EQ(got->fields.positions, std::vector<int64_t>{position + tokens});
    position += tokens;
  }
}

TEST_F(ChannelForwardTest, RegionTensorsAndOutputRegionGiveTheRpcResult) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  ShmObject shm(4 << 20);
  gdn::v1::RegisterRegionRequest reg;
  reg.set_name("r");
  reg.set_kind(gdn::v1::REGION_SYSTEM);
  reg.set_key(shm.name());
  reg.set_byte_size(4 << 20);
  gdn::v1::RegisterRegionResponse reg_response;
  grpc::ClientContext reg_context;
  ASSERT_TRUE(harness_->stub().RegisterRegion(&reg_context, reg, &reg_response).ok());
  std::unique_ptr<ForwardChannel> ch = Open("c");
  ASSERT_NE(ch, nullptr);
  const std::string a = harness_->CreateSession("");
  const std::string b = harness_->CreateSession("");
  int64_t position = 0;
  for (int tokens : {1, 70, 1}) {
    const gdn::v1::ForwardRequest inline_request = Inline(a, position, tokens);
    gdn::v1::ForwardRequest by_ref = inline_request;
    size_t at = 0;
    for (gdn::v1::Tensor* t : {by_ref.mutable_q(), by_ref.mutable_k(), by_ref.mutable_v(),
                               by_ref.mutable_g(), by_ref.mutable_beta()}) {
      const std::string data = t->data();
      std::memcpy(shm.data() + at, data.data(), data.size());
      gdn::v1::RegionRef* ref = t->mutable_ref();
      ref->set_region("r");
      ref->set_offset(static_cast<int64_t>(at));
      ref->set_byte_size(static_cast<int64_t>(data.size()));
      at += (data.size() + 255) / 256 * 256;
    }
    const size_t o_bytes = inline_request.v().data().size();
    gdn::v1::RegionRef* o = by_ref.mutable_o_region();
    o->set_region("r");
    o->set_offset(static_cast<int64_t>(at));
    o->set_byte_size(static_cast<int64_t>(o_bytes));
    absl::StatusOr<client::RawForwardResponse> got = ch->Forward(0, Encode(by_ref));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->fields.o.data.size, 0u);  // o went to the region
    gdn::v1::ForwardRequest reference = inline_request;
    reference.mutable_sequences(0)->set_session_id(b);
    gdn::v1::ForwardResponse want;
    ASSERT_TRUE(harness_->Forward(reference, &want).ok());
    ASSERT_EQ(std::string(shm.data() + at, o_bytes), want.o().data()) << tokens << " tokens";
    position += tokens;
  }
}

TEST_F(ChannelForwardTest, BadRequestsGetTheirCodeAndChangeNothing) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  std::unique_ptr<ForwardChannel> ch = Open("c", /*response_capacity=*/4096);
  ASSERT_NE(ch, nullptr);
  const std::string s = harness_->CreateSession("");
  {
    grpc::Slice garbage(std::string("\xff\xff\xff\xff not a ForwardRequest"));
    absl::StatusOr<client::RawForwardResponse> r = ch->Forward(0, grpc::ByteBuffer(&garbage, 1));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  {
    // o of 40 tokens does not fit 4 KiB: refused before it runs.
    absl::StatusOr<client::RawForwardResponse> r = ch->Forward(0, Encode(Inline(s, 0, 40)));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("o_region"));
  }
  {
    gdn::v1::ForwardRequest r = Inline(s, 0, 1);
    r.mutable_q()->mutable_data()->replace(0, 4, "\xff\xff\xff\x7f");  // a NaN
    absl::StatusOr<client::RawForwardResponse> got = ch->Forward(0, Encode(r));
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  }
  EXPECT_EQ(PositionOf(s), 0);
  // The channel still serves after every refusal.
  absl::StatusOr<client::RawForwardResponse> ok = ch->Forward(0, Encode(Inline(s, 0, 1)));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(PositionOf(s), 1);
  // A retry of that call (a position behind) is refused, naming the position.
  absl::StatusOr<client::RawForwardResponse> retry = ch->Forward(0, Encode(Inline(s, 0, 1)));
  EXPECT_EQ(retry.status().code(), absl::StatusCode::kFailedPrecondition) << retry.status();
  EXPECT_THAT(retry.status().message(), HasSubstr("1"));
  EXPECT_EQ(PositionOf(s), 1);
}

TEST_F(ChannelForwardTest, OpenRefusesWhatItCannotServe) {
  EXPECT_EQ(OpenRaw("x", "/gdn-no-such-object", 8192).error_code(), grpc::StatusCode::NOT_FOUND);
  ShmObject junk(8192);  // zeros: no GDNCHAN1 header
  const grpc::Status bad = OpenRaw("x", junk.name(), 8192);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("GDNCHAN1"));
  EXPECT_EQ(OpenRaw("", junk.name(), 8192).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(OpenRaw("x", junk.name(), 16384).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  std::unique_ptr<ForwardChannel> first = Open("one");
  ASSERT_NE(first, nullptr);
  ForwardChannelOptions o;
  absl::StatusOr<std::unique_ptr<ForwardChannel>> same =
      ForwardChannel::Open(harness_->channel(), "one", o);
  EXPECT_EQ(same.status().code(), absl::StatusCode::kAlreadyExists);
  std::unique_ptr<ForwardChannel> second = Open("two");
  ASSERT_NE(second, nullptr);
  absl::StatusOr<std::unique_ptr<ForwardChannel>> third =
      ForwardChannel::Open(harness_->channel(), "three", o);  // max_channels = 2
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  first.reset();  // CloseChannel frees a place
  EXPECT_NE(Open("three"), nullptr);
}

TEST_F(ChannelForwardTest, AClosedChannelAnswersUnavailable) {
  std::unique_ptr<ForwardChannel> ch = Open("c");
  ASSERT_NE(ch, nullptr);
  gdn::v1::CloseChannelRequest r;
  r.set_name("c");
  gdn::v1::CloseChannelResponse response;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(harness_->stub().CloseChannel(&context, r, &response).ok());
  }
  const std::string s = harness_->CreateSession("");
  absl::StatusOr<client::RawForwardResponse> got = ch->Forward(0, Encode(Inline(s, 0, 1)));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_EQ(PositionOf(s), 0);
  grpc::ClientContext context;
  EXPECT_EQ(harness_->stub().CloseChannel(&context, r, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace gdn
