#include "server/sessions/session_transfer.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dtype_convert.h"
#include "tests/server/test_random.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;

// One fp32 state page of Options(): [Hv 4, K 64, V 64].
constexpr size_t kPageBytes = 4 * 64 * 64 * sizeof(float);

GdnOptions Options() {
  GdnOptions o;
  o.shape.num_qk_heads = 2;
  o.shape.num_v_heads = 4;
  o.shape.head_dim_k = 64;
  o.shape.head_dim_v = 64;
  return o;
}

class SessionTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = gdn::testing::FreshSeed();
    rng_.seed(seed_);
    config_ = MakeLayerConfig(3, Options());
    states_.session_id = "sess-" + std::to_string(rng_() % 1000);
    states_.layers.resize(3);
    // Finite values a state can hold (import checks them): uniform [-1, 1].
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (int layer : {0, 2}) {  // layer 1 stays a zero state
      states_.layers[layer].position = 1 + rng_() % 500;
      states_.layers[layer].bytes.resize(kPageBytes);
      for (size_t i = 0; i < kPageBytes; i += sizeof(float)) {
        const float x = value(rng_);
        std::memcpy(&states_.layers[layer].bytes[i], &x, sizeof(x));
      }
    }
  }

  absl::StatusOr<SessionStates> Import(
      const std::vector<gdn::v1::SessionChunk>& chunks) {
    ImportAssembler assembler(config_, kPageBytes);
    for (const auto& chunk : chunks) {
      if (absl::Status s = assembler.Add(chunk); !s.ok()) return s;
    }
    return assembler.Finish();
  }

  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  gdn::v1::LayerConfig config_;
  SessionStates states_;
};

TEST_F(SessionTransferTest, ExportPiecesRespectTheLimitAndReassemble) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  for (size_t piece : {size_t{1000}, kPageBytes, size_t{1} << 20}) {
    const std::vector<gdn::v1::SessionChunk> chunks =
        MakeExportChunks(states_, config_, piece);
    const size_t pieces_per_layer = (kPageBytes + piece - 1) / piece;
    EXPECT_EQ(chunks.size(), 2 * pieces_per_layer + 1);  // + 1 zero layer
    EXPECT_TRUE(chunks[0].has_config());
    for (size_t i = 1; i < chunks.size(); ++i) EXPECT_FALSE(chunks[i].has_config());
    for (const auto& c : chunks) EXPECT_LE(c.data().size(), piece);

    const absl::StatusOr<SessionStates> back = Import(chunks);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->session_id, states_.session_id);
    EXPECT_EQ(back->layers_received, 3);
    for (int layer = 0; layer < 3; ++layer) {
      EXPECT_EQ(back->layers[layer].position, states_.layers[layer].position);
      EXPECT_EQ(back->layers[layer].bytes, states_.layers[layer].bytes);
    }
  }
}

TEST_F(SessionTransferTest, ConfigMismatchIsFailedPrecondition) {
  std::vector<gdn::v1::SessionChunk> chunks =
      MakeExportChunks(states_, config_, kPageBytes);
  chunks[0].mutable_config()->set_num_v_heads(8);
  const absl::StatusOr<SessionStates> r = Import(chunks);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("num_v_heads"));

  chunks = MakeExportChunks(states_, config_, kPageBytes);
  chunks[0].mutable_config()->set_state_dtype("bf16");
  EXPECT_THAT(Import(chunks).status().message(), HasSubstr("state_dtype"));

  chunks = MakeExportChunks(states_, config_, kPageBytes);
  chunks[0].clear_config();
  EXPECT_THAT(Import(chunks).status().message(), HasSubstr("config"));
}

TEST_F(SessionTransferTest, MalformedStreamsAreRejected) {
  const std::vector<gdn::v1::SessionChunk> good =
      MakeExportChunks(states_, config_, kPageBytes / 4);  // 4 pieces per full layer
  struct Case {
    const char* name;
    std::function<void(std::vector<gdn::v1::SessionChunk>&)> mutate;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"wrong layer size", [](auto& c) {
         for (auto& x : c) if (x.layer() == 0) x.set_layer_bytes(kPageBytes - 4);
       }, "layer_bytes"},
      {"missing piece", [](auto& c) { c.erase(c.begin() + 2); }, "offset"},
      {"truncated last layer", [](auto& c) { c.pop_back(); }, "bytes"},
      {"missing layer", [](auto& c) {
         std::vector<gdn::v1::SessionChunk> keep;
         for (auto& x : c) if (x.layer() != 2) keep.push_back(x);
         c = keep;
       }, "layer 2: missing"},
      {"repeated layer", [](auto& c) { c.push_back(c[4]); }, "twice"},
      {"other session", [](auto& c) { c[3].set_session_id("other"); }, "session_id"},
      {"layer out of range", [](auto& c) { c.back().set_layer(3); }, "[0, 3)"},
      {"empty", [](auto& c) { c.clear(); }, "no chunks"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    std::vector<gdn::v1::SessionChunk> chunks = good;
    tc.mutate(chunks);
    const absl::StatusOr<SessionStates> r = Import(chunks);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(tc.expect));
  }
}

// Imported states are checked like Forward's inputs (issue 21, defect 3: a
// NaN, an infinity or a huge value imported silently and the next Forward
// returned NaN): every element finite with |x| <= 1e30, else InvalidArgument
// naming the layer and the element, and nothing is assembled.
TEST_F(SessionTransferTest, StateValuesMustBeFiniteAndBounded) {
  const float inf = std::numeric_limits<float>::infinity();
  const float bad_values[] = {std::nanf(""), inf, -inf, 1.01e30f, -3e38f};
  // Element 4161 of [Hv 4, K 64, V 64] is head 1, k 1, v 1.
  constexpr size_t kElement = 4096 + 64 + 1;
  for (float bad : bad_values) {
    SCOPED_TRACE(::testing::Message() << "value " << bad);
    SessionStates states = states_;
    std::memcpy(&states.layers[2].bytes[kElement * sizeof(float)], &bad, sizeof(bad));
    const absl::StatusOr<SessionStates> r =
        Import(MakeExportChunks(states, config_, kPageBytes / 3));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("layer 2"));
    EXPECT_THAT(r.status().message(), HasSubstr("element 4161 (head 1, k 1, v 1)"));
  }
  // At the bound, denormals and signed zeros are states like any other.
  const float fine_values[] = {1e30f, -1e30f, 1e-45f, -0.0f};
  for (float fine : fine_values) {
    SessionStates states = states_;
    std::memcpy(&states.layers[0].bytes[0], &fine, sizeof(fine));
    EXPECT_TRUE(Import(MakeExportChunks(states, config_, kPageBytes)).ok()) << fine;
  }
}

TEST_F(SessionTransferTest, Bf16StateValuesAreCheckedToo) {
  GdnOptions options = Options();
  options.state_dtype = StateDType::kBF16;
  const gdn::v1::LayerConfig config = MakeLayerConfig(3, options);
  constexpr size_t kBf16PageBytes = kPageBytes / 2;
  SessionStates states;
  states.session_id = "bf16";
  states.layers.resize(3);
  states.layers[1].position = 7;
  states.layers[1].bytes.assign(kBf16PageBytes, 0);
  auto import = [&](const SessionStates& s) -> absl::Status {
    ImportAssembler assembler(config, kBf16PageBytes);
    for (const auto& chunk : MakeExportChunks(s, config, kBf16PageBytes)) {
      if (absl::Status st = assembler.Add(chunk); !st.ok()) return st;
    }
    return assembler.Finish().status();
  };
  EXPECT_TRUE(import(states).ok());
  const uint16_t nan = FloatToBf16(std::nanf(""));
  std::memcpy(&states.layers[1].bytes[2 * 3], &nan, sizeof(nan));  // element 3
  const absl::Status s = import(states);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("layer 1"));
  EXPECT_THAT(s.message(), HasSubstr("element 3 (head 0, k 0, v 3)"));
}

}  // namespace
}  // namespace gdn
