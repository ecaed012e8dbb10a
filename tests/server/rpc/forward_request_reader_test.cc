// ReadForwardRequest: every check of a Forward request that needs no state,
// on the request's bytes split into random slices (elements straddle slice
// boundaries), and the packed block it hands the engine: every byte where
// InputLayout puts it, fused gating folded into g and beta. A refused
// request returns its block to the arena.
#include "server/rpc/forward_request_reader.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/gating.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/server/engine/polling_thread.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/test_random.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;

constexpr int kLayers = 3;

GdnOptions SmallOptions(GatingMode gating) {
  GdnOptions o;
  o.shape.num_qk_heads = 2;
  o.shape.num_v_heads = 4;
  o.shape.head_dim_k = 64;
  o.shape.head_dim_v = 64;
  o.input_dtype = DType::kBF16;
  o.gating = gating;
  return o;
}

// `bytes` as a WireMessage of several random slices.
wire::WireMessage Sliced(const std::string& bytes, std::mt19937_64& rng) {
  std::vector<size_t> cuts = {0, bytes.size()};
  for (int i = 0; i < 6; ++i) cuts.push_back(bytes.empty() ? 0 : rng() % bytes.size());
  std::sort(cuts.begin(), cuts.end());
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    slices.emplace_back(bytes.data() + cuts[i], cuts[i + 1] - cuts[i]);
  }
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  return *wire::WireMessage::FromByteBuffer(buffer);
}

// Overwrites fp32 element `index` of `tensor`.
void SetFloat(gdn::v1::Tensor* tensor, size_t index, float value) {
  std::memcpy(tensor->mutable_data()->data() + index * sizeof(float), &value, sizeof(float));
}

class ForwardRequestReaderTest : public ::testing::TestWithParam<GatingMode> {
 protected:
  ForwardRequestReaderTest()
      : backend_(CreateCpuBackend(1)), arena_(backend_.get(), 64 << 20) {}

  absl::StatusOr<std::unique_ptr<ForwardCall>> Read(const gdn::v1::ForwardRequest& r,
                                                    uint64_t* request_id = nullptr) {
    std::mt19937_64 rng(seed_);
    uint64_t id = 0;
    auto call = ReadForwardRequest(Sliced(r.SerializeAsString(), rng), kLayers, options_,
                                   arena_, &id);
    if (request_id != nullptr) *request_id = id;
    return call;
  }

  void SetUp() override {
    seed_ = gdn::testing::FreshSeed();
    options_ = SmallOptions(GetParam());
    inputs_ = gdn::testing::MakeRandomInputs(options_, {3, 1, 9}, seed_,
                                             /*random_initial_state=*/false);
    good_ = gdn::testing::BuildForwardRequest(
        options_, 1, {{"alpha", 0}, {"beta", 7}, {"gamma", 2}}, inputs_);
  }

  // Applies `mutate` to a copy of the good request and expects
  // InvalidArgument whose message contains every one of `parts`.
  void ExpectInvalid(const std::function<void(gdn::v1::ForwardRequest&)>& mutate,
                     const std::vector<std::string>& parts) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed_);
    gdn::v1::ForwardRequest r = good_;
    mutate(r);
    r.set_request_id(77);
    uint64_t request_id = 0;
    const absl::StatusOr<std::unique_ptr<ForwardCall>> v = Read(r, &request_id);
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& part : parts) {
      EXPECT_THAT(std::string(v.status().message()), HasSubstr(part));
    }
    EXPECT_EQ(request_id, 77u);                 // a stream answers under it
    EXPECT_EQ(arena_.Stats().bytes_in_use, 0);  // the block went back
  }

  std::unique_ptr<Backend> backend_;
  IoArena arena_;
  uint64_t seed_ = 0;
  GdnOptions options_;
  oracle::Inputs inputs_;
  gdn::v1::ForwardRequest good_;
};

TEST_P(ForwardRequestReaderTest, GoodRequestGivesRowsAndTotal) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const absl::StatusOr<std::unique_ptr<ForwardCall>> v = Read(good_);
  ASSERT_TRUE(v.ok()) << v.status();
  const ForwardCall& call = **v;
  EXPECT_EQ(call.layer, 1);
  EXPECT_EQ(call.total_tokens, 13);
  ASSERT_EQ(call.sequences.size(), 3u);
  EXPECT_EQ(call.sequences[0].row_offset, 0);
  EXPECT_EQ(call.sequences[1].row_offset, 3);
  EXPECT_EQ(call.sequences[2].row_offset, 4);
  EXPECT_EQ(call.sequences[1].session, "beta");
  EXPECT_EQ(call.sequences[1].position, 7);
  EXPECT_EQ(call.sequences[2].num_tokens, 9);
}

TEST_P(ForwardRequestReaderTest, PacksEveryInputWhereTheLayoutSays) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  absl::StatusOr<std::unique_ptr<ForwardCall>> v = Read(good_);
  ASSERT_TRUE(v.ok()) << v.status();
  const PackedInputs& in = (*v)->inputs;
  const InputLayout want = InputLayout::For(options_.shape, options_.input_dtype, 13);
  EXPECT_EQ(in.layout.bytes, want.bytes);
  const char* base = in.block->data;
  for (auto [t, at] : {std::pair{&good_.q(), in.layout.q}, {&good_.k(), in.layout.k},
                       {&good_.v(), in.layout.v}}) {
    EXPECT_EQ(std::memcmp(base + at, t->data().data(), t->data().size()), 0);
  }
  const float* g = reinterpret_cast<const float*>(base + in.layout.g);
  const float* beta = reinterpret_cast<const float*>(base + in.layout.beta);
  const size_t hv = options_.shape.num_v_heads;
  for (size_t i = 0; i < 13 * hv; ++i) {
    if (GetParam() == GatingMode::kDirect) {
      ASSERT_EQ(g[i], inputs_.g[i]);
      ASSERT_EQ(beta[i], inputs_.beta[i]);
    } else {
      ASSERT_EQ(g[i], FusedDecay(inputs_.a[i], inputs_.A_log[i % hv], inputs_.dt_bias[i % hv]));
      ASSERT_EQ(beta[i], FusedBeta(inputs_.b[i]));
    }
  }
  EXPECT_GT(arena_.Stats().bytes_in_use, 0);
  v->reset();  // the call let go of its block
  EXPECT_EQ(arena_.Stats().bytes_in_use, 0);
}

TEST_P(ForwardRequestReaderTest, BytesThatDoNotParseAreInvalidArgument) {
  std::string bytes = good_.SerializeAsString();
  bytes.resize(bytes.size() / 2);  // cut inside a tensor
  std::mt19937_64 rng(seed_);
  uint64_t id = 1;
  const absl::StatusOr<std::unique_ptr<ForwardCall>> v =
      ReadForwardRequest(Sliced(bytes, rng), kLayers, options_, arena_, &id);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("not a gdn.v1.ForwardRequest"));
}

TEST_P(ForwardRequestReaderTest, AFullArenaIsResourceExhaustedAndKeepsNothing) {
  IoArena tiny(backend_.get(), IoArena::kMinBlockBytes);
  gdn::v1::ForwardRequest big = good_;
  std::mt19937_64 rng(seed_);
  uint64_t id = 0;
  // 13 tokens fit in 64 KiB; ask for more rows than that holds.
  const oracle::Inputs many = gdn::testing::MakeRandomInputs(options_, {200}, seed_, false);
  big = gdn::testing::BuildForwardRequest(options_, 0, {{"alpha", 0}}, many);
  const absl::StatusOr<std::unique_ptr<ForwardCall>> v =
      ReadForwardRequest(Sliced(big.SerializeAsString(), rng), kLayers, options_, tiny, &id);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("I/O buffers full"));
  EXPECT_EQ(tiny.Stats().bytes_in_use, 0);
  EXPECT_EQ(tiny.Stats().refusals, 1u);
}

TEST_P(ForwardRequestReaderTest, LayerOutOfRange) {
  ExpectInvalid([](auto& r) { r.set_layer(kLayers); }, {"layer", "[0, 3)"});
  ExpectInvalid([](auto& r) { r.set_layer(-1); }, {"layer", "got -1"});
}

TEST_P(ForwardRequestReaderTest, SequenceErrors) {
  ExpectInvalid([](auto& r) { r.clear_sequences(); }, {"sequences"});
  ExpectInvalid([](auto& r) { r.mutable_sequences(1)->set_num_tokens(0); },
                {"sequences[1].num_tokens", ">= 1"});
  ExpectInvalid([](auto& r) { r.mutable_sequences(2)->set_session_id(""); },
                {"sequences[2].session_id"});
  ExpectInvalid([](auto& r) { r.mutable_sequences(0)->set_position(-4); },
                {"sequences[0].position", ">= 0"});
  ExpectInvalid(
      [](auto& r) { r.mutable_sequences(2)->set_session_id("alpha"); },
      {"sequences[2].session_id", "alpha", "twice"});
}

TEST_P(ForwardRequestReaderTest, TokenCountMismatchIsAShapeError) {
  // num_tokens no longer adds up to the rows sent: T = 14, q has 13 rows.
  ExpectInvalid([](auto& r) { r.mutable_sequences(0)->set_num_tokens(4); },
                {"q", "[14, 2, 64]", "[13, 2, 64]"});
}

TEST_P(ForwardRequestReaderTest, TensorShapeAndDtypeErrors) {
  ExpectInvalid([](auto& r) { r.mutable_k()->set_shape(2, 32); },
                {"k: expected shape [13, 2, 64]"});
  ExpectInvalid([](auto& r) { r.mutable_v()->set_shape(1, 8); },
                {"v: expected shape [13, 4, 64]"});
  ExpectInvalid([](auto& r) { r.mutable_q()->set_dtype(gdn::v1::DTYPE_FP16); },
                {"q: expected dtype bf16"});
  ExpectInvalid([](auto& r) { r.mutable_v()->mutable_data()->pop_back(); },
                {"v", "bytes"});
}

TEST_P(ForwardRequestReaderTest, NonFiniteActivations) {
  std::mt19937_64 rng(seed_);
  const size_t index = std::uniform_int_distribution<size_t>(0, 13 * 2 * 64 - 1)(rng);
  ExpectInvalid(
      [&](auto& r) {
        const uint16_t nan_bf16 = 0x7fc0;
        std::memcpy(r.mutable_k()->mutable_data()->data() + 2 * index,
                    &nan_bf16, 2);
      },
      {"k: element " + std::to_string(index) + " ", "finite"});
}

TEST_P(ForwardRequestReaderTest, GatingTensors) {
  if (GetParam() == GatingMode::kDirect) {
    ExpectInvalid([](auto& r) { r.clear_g(); }, {"g: missing", "[13, 4]"});
    ExpectInvalid([](auto& r) { r.mutable_beta()->set_shape(1, 5); },
                  {"beta: expected shape [13, 4]"});
    ExpectInvalid([](auto& r) { SetFloat(r.mutable_g(), 17, 0.25f); },
                  {"g: element 17", "<= 0"});
    // Finite but below the floor the chunked prefill's 64-token sums need.
    ExpectInvalid([](auto& r) { SetFloat(r.mutable_g(), 4, -1e38f); },
                  {"g: element 4", ">= -2^120"});
    ExpectInvalid([](auto& r) { SetFloat(r.mutable_beta(), 5, 1.5f); },
                  {"beta: element 5", "[0, 1]"});
    ExpectInvalid(
        [](auto& r) {
          SetFloat(r.mutable_g(), 3, -std::numeric_limits<float>::infinity());
        },
        {"g: element 3", "finite"});
    ExpectInvalid(
        [](auto& r) {
          const float x = 0.5f;
          *r.mutable_a_log() = wire::MakeTensor(DType::kF32, {1}, &x);
        },
        {"a_log", "not used with gating=direct"});
  } else {
    ExpectInvalid([](auto& r) { r.clear_a(); }, {"a: missing"});
    ExpectInvalid([](auto& r) { r.mutable_a_log()->set_shape(0, 8); },
                  {"a_log: expected shape [4]"});
    ExpectInvalid([](auto& r) { r.mutable_dt_bias()->set_dtype(gdn::v1::DTYPE_BF16); },
                  {"dt_bias: expected dtype fp32"});
    ExpectInvalid(
        [](auto& r) {
          SetFloat(r.mutable_b(), 9, std::numeric_limits<float>::quiet_NaN());
        },
        {"b: element 9"});
    ExpectInvalid(
        [](auto& r) {
          const std::vector<float> g(13 * 4, -0.1f);
          *r.mutable_g() = wire::MakeTensor(DType::kF32, {13, 4}, g.data());
        },
        {"g", "not used with gating=fused"});
  }
}

// Requests of 1 MiB and more are packed by the arena's copy workers in
// parts: the block must be the same bytes, and a refusal the same error, as
// one thread copying in order would give.
class LargeForwardRequestTest : public ::testing::Test {
 protected:
  static constexpr int kTokens = 2500;  // ~2.6 MiB of tensors: 2-5 parts each

  LargeForwardRequestTest()
      : backend_(CreateCpuBackend(1)), arena_(backend_.get(), 256 << 20, /*copy_threads=*/3) {
    seed_ = gdn::testing::FreshSeed();
    options_ = SmallOptions(GatingMode::kDirect);
    inputs_ = gdn::testing::MakeRandomInputs(options_, {kTokens - 700, 700}, seed_,
                                             /*random_initial_state=*/false);
    good_ = gdn::testing::BuildForwardRequest(options_, 0, {{"a", 0}, {"b", 3}}, inputs_);
  }

  absl::StatusOr<std::unique_ptr<ForwardCall>> Read(const gdn::v1::ForwardRequest& r,
                                                    uint64_t salt = 0) {
    return ReadInto(arena_, r, salt);
  }
  absl::StatusOr<std::unique_ptr<ForwardCall>> ReadInto(IoArena& arena,
                                                        const gdn::v1::ForwardRequest& r,
                                                        uint64_t salt = 0) {
    std::mt19937_64 rng(seed_ + salt);
    uint64_t id = 0;
    return ReadForwardRequest(Sliced(r.SerializeAsString(), rng), kLayers, options_, arena,
                              &id);
  }

  // Expects every packed byte to be r's (default: good_).
  void ExpectPacked(const ForwardCall& call, const gdn::v1::ForwardRequest* r = nullptr) {
    if (r == nullptr) r = &good_;
    const PackedInputs& in = call.inputs;
    const char* base = in.block->data;
    for (auto [t, at] : {std::pair{&r->q(), in.layout.q}, {&r->k(), in.layout.k},
                         {&r->v(), in.layout.v}, {&r->g(), in.layout.g},
                         {&r->beta(), in.layout.beta}}) {
      ASSERT_EQ(std::memcmp(base + at, t->data().data(), t->data().size()), 0);
    }
  }

  std::unique_ptr<Backend> backend_;
  IoArena arena_;
  uint64_t seed_ = 0;
  GdnOptions options_;
  oracle::Inputs inputs_;
  gdn::v1::ForwardRequest good_;
};

TEST_F(LargeForwardRequestTest, PacksEveryByteWhereTheLayoutSays) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  ASSERT_GE(good_.ByteSizeLong(), size_t{2} << 20);
  absl::StatusOr<std::unique_ptr<ForwardCall>> v = Read(good_);
  ASSERT_TRUE(v.ok()) << v.status();
  ExpectPacked(**v);
}

TEST_F(LargeForwardRequestTest, TheErrorIsTheFirstInTensorAndElementOrder) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  std::mt19937_64 rng(seed_);
  const size_t qk_elements = size_t{kTokens} * 2 * 64;
  const uint16_t nan_bf16 = 0x7fc0;
  // Two bad elements of k, in its second and third parts (a part is 256 KiB,
  // 131072 bf16 values), and one early in v: k's lower index is the error.
  constexpr size_t kPart = 131072;
  static_assert(size_t{kTokens} * 2 * 64 > 2 * kPart);
  const size_t first = std::uniform_int_distribution<size_t>(kPart, 2 * kPart - 1)(rng);
  const size_t second = std::uniform_int_distribution<size_t>(2 * kPart, qk_elements - 1)(rng);
  gdn::v1::ForwardRequest r = good_;
  for (size_t index : {first, second}) {
    std::memcpy(r.mutable_k()->mutable_data()->data() + 2 * index, &nan_bf16, 2);
  }
  std::memcpy(r.mutable_v()->mutable_data()->data() + 2 * 5, &nan_bf16, 2);
  absl::StatusOr<std::unique_ptr<ForwardCall>> v = Read(r);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("k: element " + std::to_string(first) + " "));
  // A range error in the last part of beta, with k clean: named with its index.
  r = good_;
  const size_t gate = size_t{kTokens} * 4 - 3;
  SetFloat(r.mutable_beta(), gate, 2.0f);
  v = Read(r);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("beta: element " + std::to_string(gate)));
  EXPECT_EQ(arena_.Stats().bytes_in_use, 0);  // the blocks went back
}

// --pack_share_bytes below a request's size: a ~0.4 MiB request is cut into
// parts of ~1/8 of it (32 KiB at least), k into several; the same bytes and
// the same first error as one thread's.
TEST_F(LargeForwardRequestTest, MediumRequestsFromTheShareThresholdUseSmallerParts) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  IoArena medium(backend_.get(), 64 << 20, /*copy_threads=*/3, /*share_from_bytes=*/64 << 10);
  constexpr int kMediumTokens = 400;
  const oracle::Inputs inputs = gdn::testing::MakeRandomInputs(
      options_, {kMediumTokens - 150, 150}, seed_ + 1, /*random_initial_state=*/false);
  const gdn::v1::ForwardRequest good =
      gdn::testing::BuildForwardRequest(options_, 0, {{"a", 0}, {"b", 3}}, inputs);
  ASSERT_LT(good.ByteSizeLong(), size_t{1} << 20);
  absl::StatusOr<std::unique_ptr<ForwardCall>> v = ReadInto(medium, good);
  ASSERT_TRUE(v.ok()) << v.status();
  ExpectPacked(**v, &good);
  v->reset();
  // Bad elements of k (~100 KiB: two parts of ~52 KiB): one in [32, 64)
  // KiB, one after it; and one early in v. k's first is the error.
  std::mt19937_64 rng(seed_);
  const size_t k_elements = good.k().data().size() / 2;
  constexpr size_t kMinPartElements = (32 << 10) / 2;
  ASSERT_GT(k_elements, 2 * kMinPartElements);
  const size_t first =
      std::uniform_int_distribution<size_t>(kMinPartElements, 2 * kMinPartElements - 1)(rng);
  const size_t second = std::uniform_int_distribution<size_t>(first + 1, k_elements - 1)(rng);
  gdn::v1::ForwardRequest r = good;
  const uint16_t nan_bf16 = 0x7fc0;
  for (size_t index : {first, second}) {
    std::memcpy(r.mutable_k()->mutable_data()->data() + 2 * index, &nan_bf16, 2);
  }
  std::memcpy(r.mutable_v()->mutable_data()->data() + 2 * 3, &nan_bf16, 2);
  v = ReadInto(medium, r);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("k: element " + std::to_string(first) + " "));
  EXPECT_EQ(medium.Stats().bytes_in_use, 0);
}

// --pack_poll_share_bytes: with a thread polling the copy workers (the
// idle engine's), a ~0.4 MiB request is packed in parts shared with it:
// the same bytes, and the same first error, as one thread's.
TEST_F(LargeForwardRequestTest, MediumRequestsSharedWithAPollerPackTheSame) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  IoArena polled(backend_.get(), 64 << 20, /*copy_threads=*/0, /*share_from_bytes=*/1 << 20,
                 /*poll_share_from_bytes=*/64 << 10);
  testing_engine::PollingThread poller(polled.copy_workers());
  const oracle::Inputs inputs = gdn::testing::MakeRandomInputs(
      options_, {250, 150}, seed_ + 2, /*random_initial_state=*/false);
  const gdn::v1::ForwardRequest good =
      gdn::testing::BuildForwardRequest(options_, 0, {{"a", 0}, {"b", 3}}, inputs);
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<std::unique_ptr<ForwardCall>> v = ReadInto(polled, good, i);
    ASSERT_TRUE(v.ok()) << v.status();
    ExpectPacked(**v, &good);
  }
  gdn::v1::ForwardRequest r = good;
  const uint16_t nan_bf16 = 0x7fc0;
  const size_t k_elements = good.k().data().size() / 2;
  for (size_t index : {k_elements / 2, k_elements - 1}) {
    std::memcpy(r.mutable_k()->mutable_data()->data() + 2 * index, &nan_bf16, 2);
  }
  std::memcpy(r.mutable_v()->mutable_data()->data() + 2 * 3, &nan_bf16, 2);
  absl::StatusOr<std::unique_ptr<ForwardCall>> v = ReadInto(polled, r);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("k: element " + std::to_string(k_elements / 2) + " "));
  EXPECT_EQ(polled.Stats().bytes_in_use, 0);
}

TEST_F(LargeForwardRequestTest, RequestThreadsAtOnceShareTheWorkers) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        absl::StatusOr<std::unique_ptr<ForwardCall>> v = Read(good_, 100 * t + i);
        if (!v.ok()) {
          ++failed;
          continue;
        }
        const PackedInputs& in = (*v)->inputs;
        failed += std::memcmp(in.block->data + in.layout.v, good_.v().data().data(),
                              good_.v().data().size()) != 0;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Gating, ForwardRequestReaderTest,
                         ::testing::Values(GatingMode::kDirect,
                                           GatingMode::kFused),
                         [](const auto& info) {
                           return std::string(GatingModeName(info.param));
                         });

}  // namespace
}  // namespace gdn
