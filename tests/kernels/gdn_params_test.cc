// ValidateParams: every host-checkable error is InvalidArgument and names
// the offending field.
#include "kernels/gdn_params.h"

#include <functional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;

// Valid params over dummy (never dereferenced) buffers: 3 sequences of
// 1, 4, 2 tokens.
class GdnParamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.shape = {2, 4, 64, 64};
    options_.gating = GatingMode::kDirect;
    p_.num_seqs = 3;
    p_.total_tokens = 7;
    p_.cu_seqlens = cu_.data();
    p_.cu_seqlens_host = cu_.data();
    p_.q = p_.k = p_.v = buffer_.data();
    p_.o = buffer_.data();
    p_.g = p_.beta = buffer_.data();
    p_.initial_pages = pages_.data();
    p_.final_pages = pages_.data();
    p_.pool.base = buffer_.data();
    p_.pool.num_pages = 4;
    p_.pool.dtype = options_.state_dtype;
    p_.pool.page_bytes = static_cast<int64_t>(
        StatePageLayout::For(options_.shape, options_.state_dtype).page_bytes);
  }

  void ExpectError(const GdnParams& p, int max_tokens, const char* field) {
    const absl::Status st = ValidateParams(options_, p, max_tokens);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(st.message(), HasSubstr(field));
  }

  std::vector<float> buffer_ = std::vector<float>(16);
  std::vector<int32_t> cu_ = {0, 1, 5, 7};
  std::vector<int32_t> pages_ = {0, 1, 2};
  GdnOptions options_;
  GdnParams p_;
};

TEST_F(GdnParamsTest, ValidParamsPass) {
  EXPECT_TRUE(ValidateParams(options_, p_, 0).ok());
  EXPECT_TRUE(ValidateParams(options_, p_, kMaxDecodeTokens).ok());
}

TEST_F(GdnParamsTest, MissingPointersAreNamed) {
  const std::vector<std::pair<const char*, std::function<void(GdnParams*)>>>
      cases = {
          {"cu_seqlens_host", [](GdnParams* p) { p->cu_seqlens_host = nullptr; }},
          {"cu_seqlens", [](GdnParams* p) { p->cu_seqlens = nullptr; }},
          {"q", [](GdnParams* p) { p->q = nullptr; }},
          {"k", [](GdnParams* p) { p->k = nullptr; }},
          {"v", [](GdnParams* p) { p->v = nullptr; }},
          {"o", [](GdnParams* p) { p->o = nullptr; }},
          {"g", [](GdnParams* p) { p->g = nullptr; }},
          {"beta", [](GdnParams* p) { p->beta = nullptr; }},
          {"initial_pages", [](GdnParams* p) { p->initial_pages = nullptr; }},
          {"final_pages", [](GdnParams* p) { p->final_pages = nullptr; }},
          {"pool.base", [](GdnParams* p) { p->pool.base = nullptr; }},
      };
  for (const auto& [field, mutate] : cases) {
    GdnParams p = p_;
    mutate(&p);
    ExpectError(p, 0, field);
  }
}

TEST_F(GdnParamsTest, FusedGatingNeedsItsOwnPointers) {
  options_.gating = GatingMode::kFused;
  // g / beta are set but a, b, A_log, dt_bias are not.
  ExpectError(p_, 0, "a must be set");
  GdnParams p = p_;
  p.a = p.b = buffer_.data();
  ExpectError(p, 0, "A_log");
  p.A_log = buffer_.data();
  ExpectError(p, 0, "dt_bias");
  p.dt_bias = buffer_.data();
  p.g = p.beta = nullptr;  // not needed when fused
  EXPECT_TRUE(ValidateParams(options_, p, 0).ok());
}

TEST_F(GdnParamsTest, SequenceLengthsAreChecked) {
  ExpectError(p_, 3, "sequence 1 has 4 tokens");  // over the decode limit
  GdnParams p = p_;
  p.num_seqs = 0;
  ExpectError(p, 0, "num_seqs");
  std::vector<int32_t> empty_seq = {0, 1, 1, 7};
  p = p_;
  p.cu_seqlens_host = empty_seq.data();
  ExpectError(p, 0, "sequence 1 has 0 tokens");
  std::vector<int32_t> bad_start = {1, 2, 5, 7};
  p.cu_seqlens_host = bad_start.data();
  ExpectError(p, 0, "cu_seqlens[0]");
  p = p_;
  p.total_tokens = 8;
  ExpectError(p, 0, "total_tokens");
}

TEST_F(GdnParamsTest, PoolMustMatchOptions) {
  GdnParams p = p_;
  p.pool.dtype = StateDType::kBF16;
  ExpectError(p, 0, "pool dtype");
  p = p_;
  p.pool.page_bytes -= 256;
  ExpectError(p, 0, "pool.page_bytes");
}

// Checkpoints: the interval a positive multiple of kCheckpointTokens, a
// slot array, and enough slots for every sequence (lengths 1, 4, 2 need
// none at 64; at 64 a 65-token sequence needs one, a 129-token one two).
TEST_F(GdnParamsTest, CheckpointsAreChecked) {
  GdnParams p = p_;
  p.checkpoint_interval = 64;
  ExpectError(p, 0, "checkpoint_pages");
  std::vector<int32_t> slots = {0, 1, 2, 3, 4, 5};
  p.checkpoint_pages = slots.data();
  EXPECT_TRUE(ValidateParams(options_, p, 0).ok());  // no sequence reaches 64 tokens
  for (int32_t bad : {-64, 32, 100}) {
    p.checkpoint_interval = bad;
    ExpectError(p, 0, "checkpoint_interval");
  }
  std::vector<int32_t> cu = {0, 65, 194, 195};
  p.cu_seqlens = p.cu_seqlens_host = cu.data();
  p.total_tokens = 195;
  p.checkpoint_interval = 64;
  p.checkpoints_per_seq = 1;
  ExpectError(p, 0, "checkpoints_per_seq");  // sequence 1 (129 tokens) needs 2
  p.checkpoints_per_seq = 2;
  EXPECT_TRUE(ValidateParams(options_, p, 0).ok());
  EXPECT_EQ(CheckpointCount(64, 64), 0);
  EXPECT_EQ(CheckpointCount(65, 64), 1);
  EXPECT_EQ(CheckpointCount(129, 64), 2);
  EXPECT_EQ(CheckpointCount(1000, 128), 7);
}

// kPerTokenStates: len - 1 slots per sequence, and only sequences of at most
// kMaxDecodeTokens tokens (lengths 1, 4, 2 here; then one of 9).
TEST_F(GdnParamsTest, PerTokenStatesAreChecked) {
  GdnParams p = p_;
  std::vector<int32_t> slots(21, 0);
  p.checkpoint_interval = kPerTokenStates;
  p.checkpoint_pages = slots.data();
  p.checkpoints_per_seq = 2;
  ExpectError(p, 0, "checkpoints_per_seq");  // sequence 1 (4 tokens) needs 3
  p.checkpoints_per_seq = 3;
  EXPECT_TRUE(ValidateParams(options_, p, kMaxDecodeTokens).ok());
  std::vector<int32_t> cu = {0, 9, 10, 11};
  p.cu_seqlens = p.cu_seqlens_host = cu.data();
  p.total_tokens = 11;
  p.checkpoints_per_seq = 8;
  ExpectError(p, 0, "per-token states");
  EXPECT_EQ(CheckpointCount(8, kPerTokenStates), 7);
  EXPECT_EQ(CheckpointCount(1, kPerTokenStates), 0);
}

}  // namespace
}  // namespace gdn
