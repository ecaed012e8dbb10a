// Forward with tensors in a registered SYSTEM region (POSIX shared memory),
// end to end through gRPC on the cpu backend: outputs equal the inline path
// bit for bit, inline and region tensors mix, o lands in an output region,
// and every bad reference gets its code and leaves the state unchanged.
#include <grpcpp/grpcpp.h>

#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <string>
#include <thread>
#include <vector>

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
using gdn::testing::ShmObject;

constexpr size_t kRegionBytes = 4 << 20;

class RegionForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = gdn::testing::FreshSeed();
    harness_ = std::make_unique<gdn::testing::ServerHarness>(gdn::testing::SmallServerConfig());
    options_ = harness_->config().options;
    shm_ = std::make_unique<ShmObject>(kRegionBytes);
    ASSERT_TRUE(Register("in", 0, kRegionBytes).ok());
  }

  grpc::Status Register(const std::string& name, int64_t offset, int64_t bytes) {
    gdn::v1::RegisterRegionRequest r;
    r.set_name(name);
    r.set_kind(gdn::v1::REGION_SYSTEM);
    r.set_key(shm_->name());
    r.set_offset(offset);
    r.set_byte_size(bytes);
    gdn::v1::RegisterRegionResponse response;
    grpc::ClientContext context;
    return harness_->stub().RegisterRegion(&context, r, &response);
  }
  grpc::Status Unregister(const std::string& name) {
    gdn::v1::UnregisterRegionRequest r;
    r.set_name(name);
    gdn::v1::UnregisterRegionResponse response;
    grpc::ClientContext context;
    return harness_->stub().UnregisterRegion(&context, r, &response);
  }
  gdn::v1::ListRegionsResponse List() {
    gdn::v1::ListRegionsResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(harness_->stub().ListRegions(&context, {}, &response).ok());
    return response;
  }

  // A random inline request for `session` at `position` with `tokens`.
  gdn::v1::ForwardRequest Inline(const std::string& session, int64_t position, int tokens,
                                 int layer = 0) {
    const oracle::Inputs inputs =
        gdn::testing::MakeRandomInputs(options_, {tokens}, seed_ + (++calls_) * 7919, false);
    return gdn::testing::BuildForwardRequest(options_, layer, {{session, position}}, inputs);
  }

  // Moves the named tensors' bytes into the region (256-aligned, from
  // `at`) and references them instead. Returns the next free offset.
  size_t MoveToRegion(gdn::v1::ForwardRequest* r, const std::vector<std::string>& names,
                      size_t at = 0) {
    for (const std::string& name : names) {
      gdn::v1::Tensor* t = TensorNamed(r, name);
      const std::string data = t->data();
      std::memcpy(shm_->data() + at, data.data(), data.size());
      gdn::v1::RegionRef* ref = t->mutable_ref();  // clears data (oneof)
      ref->set_region("in");
      ref->set_offset(static_cast<int64_t>(at));
      ref->set_byte_size(static_cast<int64_t>(data.size()));
      at += (data.size() + 255) / 256 * 256;
    }
    return at;
  }

  static gdn::v1::Tensor* TensorNamed(gdn::v1::ForwardRequest* r, const std::string& name) {
    if (name == "q") return r->mutable_q();
    if (name == "k") return r->mutable_k();
    if (name == "v") return r->mutable_v();
    if (name == "g") return r->mutable_g();
    return r->mutable_beta();
  }

  int64_t PositionOf(const std::string& session, int layer = 0) {
    const gdn::v1::DescribeSessionResponse d = harness_->Describe(session);
    for (const auto& l : d.layers()) {
      if (l.layer() == layer) return l.position();
    }
    return 0;
  }

  // Runs `request` on a fresh session and the same request inline on
  // another, then one more inline step on both: o and the state after
  // (seen through the next step's o) must be equal bit for bit.
  void ExpectSameAsInline(gdn::v1::ForwardRequest request,
                          const gdn::v1::ForwardRequest& inline_request,
                          const char* o_from_region = nullptr) {
    const std::string a = harness_->CreateSession("");
    const std::string b = harness_->CreateSession("");
    request.mutable_sequences(0)->set_session_id(a);
    gdn::v1::ForwardRequest reference = inline_request;
    reference.mutable_sequences(0)->set_session_id(b);
    gdn::v1::ForwardResponse got, want;
    ASSERT_TRUE(harness_->Forward(request, &got).ok());
    ASSERT_TRUE(harness_->Forward(reference, &want).ok());
    if (o_from_region != nullptr) {
      EXPECT_TRUE(got.o().data().empty());
      EXPECT_EQ(got.o().shape_size(), 3);
      ASSERT_EQ(std::memcmp(o_from_region, want.o().data().data(), want.o().data().size()), 0);
    } else {
      ASSERT_EQ(got.o().data(), want.o().data());
    }
    EXPECT_EQ(got.positions(0), want.positions(0));
    gdn::v1::ForwardRequest next = Inline(a, got.positions(0), 2);
    gdn::v1::ForwardResponse next_a, next_b;
    ASSERT_TRUE(harness_->Forward(next, &next_a).ok());
    next.mutable_sequences(0)->set_session_id(b);
    ASSERT_TRUE(harness_->Forward(next, &next_b).ok());
    EXPECT_EQ(next_a.o().data(), next_b.o().data());
  }

  // `request` (on a session at position 0 of layer 0) must fail with
  // `code`, mentioning `text`, and change nothing.
  void ExpectRefused(gdn::v1::ForwardRequest request, grpc::StatusCode code,
                     const std::string& text) {
    const std::string s = harness_->CreateSession("");
    request.mutable_sequences(0)->set_session_id(s);
    gdn::v1::ForwardResponse response;
    const grpc::Status status = harness_->Forward(request, &response);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(text));
    EXPECT_EQ(PositionOf(s), 0);
    EXPECT_EQ(List().regions(0).calls_in_flight(), 0);  // nothing held after the failure
  }

  uint64_t seed_ = 0;
  int calls_ = 0;
  std::unique_ptr<gdn::testing::ServerHarness> harness_;
  GdnOptions options_;
  std::unique_ptr<ShmObject> shm_;
};

TEST_F(RegionForwardTest, RegionInputsGiveTheInlineResultBitForBit) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  for (int tokens : {1, 7, 130}) {  // decode, short and chunked prefill
    const gdn::v1::ForwardRequest inline_request = Inline("x", 0, tokens);
    gdn::v1::ForwardRequest by_ref = inline_request;
    MoveToRegion(&by_ref, {"q", "k", "v", "g", "beta"});
    ExpectSameAsInline(by_ref, inline_request);
  }
}

TEST_F(RegionForwardTest, InlineAndRegionTensorsMix) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const gdn::v1::ForwardRequest inline_request = Inline("x", 0, 9);
  gdn::v1::ForwardRequest mixed = inline_request;
  MoveToRegion(&mixed, {"k", "g"});
  ExpectSameAsInline(mixed, inline_request);
}

TEST_F(RegionForwardTest, OutputRegionReceivesO) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const gdn::v1::ForwardRequest inline_request = Inline("x", 0, 70);
  gdn::v1::ForwardRequest by_ref = inline_request;
  const size_t o_at = MoveToRegion(&by_ref, {"q", "k", "v", "g", "beta"});
  const int64_t o_bytes = static_cast<int64_t>(inline_request.v().data().size());
  std::memset(shm_->data() + o_at, 0x7f, o_bytes);
  gdn::v1::RegionRef* o = by_ref.mutable_o_region();
  o->set_region("in");
  o->set_offset(static_cast<int64_t>(o_at));
  o->set_byte_size(o_bytes);
  ExpectSameAsInline(by_ref, inline_request, shm_->data() + o_at);
}

TEST_F(RegionForwardTest, BadReferencesAreRefusedAndChangeNothing) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const gdn::v1::ForwardRequest base = Inline("x", 0, 3);
  {
    gdn::v1::ForwardRequest r = base;
    MoveToRegion(&r, {"q"});
    r.mutable_q()->mutable_ref()->set_region("nope");
    ExpectRefused(r, grpc::StatusCode::NOT_FOUND, "no region 'nope'");
  }
  {
    gdn::v1::ForwardRequest r = base;
    MoveToRegion(&r, {"v"});
    r.mutable_v()->mutable_ref()->set_offset(kRegionBytes - 64);
    ExpectRefused(r, grpc::StatusCode::INVALID_ARGUMENT, "lie outside region 'in'");
  }
  {
    gdn::v1::ForwardRequest r = base;
    MoveToRegion(&r, {"k"});
    r.mutable_k()->mutable_ref()->set_byte_size(r.k().ref().byte_size() - 4);
    ExpectRefused(r, grpc::StatusCode::INVALID_ARGUMENT, "k: expected 1536 bytes");
  }
  {
    gdn::v1::ForwardRequest r = base;
    MoveToRegion(&r, {"q"});
    r.mutable_q()->mutable_ref()->set_offset(2);  // fp32 elements
    ExpectRefused(r, grpc::StatusCode::INVALID_ARGUMENT, "not aligned");
  }
  for (const char* name : {"q", "g"}) {
    gdn::v1::ForwardRequest r = base;
    MoveToRegion(&r, {name});
    float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(shm_->data() + 4 * 5, &nan, 4);  // element 5 of the tensor at offset 0
    ExpectRefused(r, grpc::StatusCode::INVALID_ARGUMENT,
                  std::string(name) + ": element 5 is nan");
  }
  {
    gdn::v1::ForwardRequest r = base;
    const size_t o_at = MoveToRegion(&r, {"beta"});
    float big = 2.0f;  // beta must be in [0, 1]
    std::memcpy(shm_->data() + 4, &big, 4);
    r.mutable_o_region()->set_region("in");
    r.mutable_o_region()->set_offset(static_cast<int64_t>(o_at));
    r.mutable_o_region()->set_byte_size(static_cast<int64_t>(base.v().data().size()));
    ExpectRefused(r, grpc::StatusCode::INVALID_ARGUMENT, "beta: element 1 is 2");
  }
  {
    gdn::v1::ForwardRequest r = base;
    r.mutable_o_region()->set_region("in");
    r.mutable_o_region()->set_byte_size(16);
    ExpectRefused(r, grpc::StatusCode::INVALID_ARGUMENT, "o_region.ref.byte_size");
  }
}

TEST_F(RegionForwardTest, UnregisteringARegionInUseFailsTheCallAndChangesNothing) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const std::string s = harness_->CreateSession("held");
  const std::string twin = harness_->CreateSession("twin");  // the same history, no region call
  // Position 2 waits in the engine for positions 0..1, holding the region.
  gdn::v1::ForwardRequest later = Inline(s, 2, 1);
  MoveToRegion(&later, {"q", "k", "v", "g", "beta"});
  std::promise<grpc::Status> done;
  std::thread waiter([&] {
    gdn::v1::ForwardResponse response;
    done.set_value(harness_->Forward(later, &response));
  });
  for (int i = 0; i < 2000 && List().regions(0).calls_in_flight() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(List().regions(0).calls_in_flight(), 1);
  ASSERT_TRUE(Unregister("in").ok());
  EXPECT_EQ(List().regions_size(), 0);
  EXPECT_EQ(Unregister("in").error_code(), grpc::StatusCode::NOT_FOUND);
  gdn::v1::ForwardRequest first = Inline(s, 0, 2);  // fills the gap
  gdn::v1::ForwardResponse response;
  ASSERT_TRUE(harness_->Forward(first, &response).ok());
  first.mutable_sequences(0)->set_session_id(twin);
  ASSERT_TRUE(harness_->Forward(first, &response).ok());
  const grpc::Status status = done.get_future().get();
  waiter.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("region 'in' was unregistered"));
  EXPECT_EQ(PositionOf(s), 2);  // the first call only
  // The state too: the next call gives what it gives on the twin.
  ASSERT_TRUE(Register("in", 0, kRegionBytes).ok());  // the name is free again
  gdn::v1::ForwardRequest next = Inline(s, 2, 3);
  MoveToRegion(&next, {"q"});
  gdn::v1::ForwardResponse on_s, on_twin;
  ASSERT_TRUE(harness_->Forward(next, &on_s).ok());
  next.mutable_sequences(0)->set_session_id(twin);
  ASSERT_TRUE(harness_->Forward(next, &on_twin).ok());
  EXPECT_EQ(on_s.o().data(), on_twin.o().data());
  EXPECT_EQ(PositionOf(s), 5);
}

TEST_F(RegionForwardTest, RegionMethodsRefuseBadInput) {
  EXPECT_EQ(Register("in", 0, 16).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(Register("other", 0, kRegionBytes + 1).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Unregister("never").error_code(), grpc::StatusCode::NOT_FOUND);
  const gdn::v1::ListRegionsResponse list = List();
  ASSERT_EQ(list.regions_size(), 1);
  EXPECT_EQ(list.regions(0).name(), "in");
  EXPECT_EQ(list.regions(0).key(), shm_->name());
  EXPECT_EQ(list.regions(0).byte_size(), static_cast<int64_t>(kRegionBytes));
}

}  // namespace
}  // namespace gdn
