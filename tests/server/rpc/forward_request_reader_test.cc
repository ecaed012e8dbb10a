#include "server/rpc/request_validation.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
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

class RequestValidationTest : public ::testing::TestWithParam<GatingMode> {
 protected:
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
    const absl::StatusOr<ValidatedForward> v =
        ValidateForwardRequest(r, kLayers, options_);
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& part : parts) {
      EXPECT_THAT(std::string(v.status().message()), HasSubstr(part));
    }
  }

  // Overwrites fp32 element `index` of `tensor`.
  static void SetFloat(gdn::v1::Tensor* tensor, size_t index, float value) {
    std::memcpy(tensor->mutable_data()->data() + index * sizeof(float), &value,
                sizeof(float));
  }

  uint64_t seed_ = 0;
  GdnOptions options_;
  oracle::Inputs inputs_;
  gdn::v1::ForwardRequest good_;
};

TEST_P(RequestValidationTest, GoodRequestGivesRowsAndTotal) {
  const absl::StatusOr<ValidatedForward> v =
      ValidateForwardRequest(good_, kLayers, options_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->layer, 1);
  EXPECT_EQ(v->total_tokens, 13);
  ASSERT_EQ(v->sequences.size(), 3u);
  EXPECT_EQ(v->sequences[0].row_offset, 0);
  EXPECT_EQ(v->sequences[1].row_offset, 3);
  EXPECT_EQ(v->sequences[2].row_offset, 4);
  EXPECT_EQ(v->sequences[1].session, "beta");
  EXPECT_EQ(v->sequences[1].position, 7);
  EXPECT_EQ(v->sequences[2].num_tokens, 9);
}

TEST_P(RequestValidationTest, LayerOutOfRange) {
  ExpectInvalid([](auto& r) { r.set_layer(kLayers); }, {"layer", "[0, 3)"});
  ExpectInvalid([](auto& r) { r.set_layer(-1); }, {"layer", "got -1"});
}

TEST_P(RequestValidationTest, SequenceErrors) {
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

TEST_P(RequestValidationTest, TokenCountMismatchIsAShapeError) {
  // num_tokens no longer adds up to the rows sent: T = 14, q has 13 rows.
  ExpectInvalid([](auto& r) { r.mutable_sequences(0)->set_num_tokens(4); },
                {"q", "[14, 2, 64]", "[13, 2, 64]"});
}

TEST_P(RequestValidationTest, TensorShapeAndDtypeErrors) {
  ExpectInvalid([](auto& r) { r.mutable_k()->set_shape(2, 32); },
                {"k: expected shape [13, 2, 64]"});
  ExpectInvalid([](auto& r) { r.mutable_v()->set_shape(1, 8); },
                {"v: expected shape [13, 4, 64]"});
  ExpectInvalid([](auto& r) { r.mutable_q()->set_dtype(gdn::v1::DTYPE_FP16); },
                {"q: expected dtype bf16"});
  ExpectInvalid([](auto& r) { r.mutable_v()->mutable_data()->pop_back(); },
                {"v", "bytes"});
}

TEST_P(RequestValidationTest, NonFiniteActivations) {
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

TEST_P(RequestValidationTest, GatingTensors) {
  if (GetParam() == GatingMode::kDirect) {
    ExpectInvalid([](auto& r) { r.clear_g(); }, {"g: missing", "[13, 4]"});
    ExpectInvalid([](auto& r) { r.mutable_beta()->set_shape(1, 5); },
                  {"beta: expected shape [13, 4]"});
    ExpectInvalid([](auto& r) { SetFloat(r.mutable_g(), 17, 0.25f); },
                  {"g: element 17", "<= 0"});
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

INSTANTIATE_TEST_SUITE_P(Gating, RequestValidationTest,
                         ::testing::Values(GatingMode::kDirect,
                                           GatingMode::kFused),
                         [](const auto& info) {
                           return std::string(GatingModeName(info.param));
                         });

}  // namespace
}  // namespace gdn
