#include "client/forward_split.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gdn::client {
namespace {

// Random bytes standing for a tensor of `rows` rows of `row_bytes` each.
v1::Tensor RandomTensor(std::mt19937_64& rng, int64_t rows, std::vector<int64_t> inner,
                        int elem_bytes) {
  v1::Tensor t;
  t.set_dtype(v1::DTYPE_FP32);
  t.add_shape(rows);
  int64_t row_bytes = elem_bytes;
  for (int64_t d : inner) {
    t.add_shape(d);
    row_bytes *= d;
  }
  std::string data(rows * row_bytes, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  t.set_data(data);
  return t;
}

v1::ForwardRequest RandomRequest(const std::vector<int>& tokens, uint64_t seed) {
  std::mt19937_64 rng(seed);
  v1::ForwardRequest r;
  r.set_layer(3);
  r.set_request_id(77);
  int64_t t = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    v1::SequenceSpec* s = r.add_sequences();
    s->set_session_id("s" + std::to_string(i));
    s->set_position(100 * (i + 1) + rng() % 50);
    s->set_num_tokens(tokens[i]);
    t += tokens[i];
  }
  *r.mutable_q() = RandomTensor(rng, t, {2, 8}, 4);
  *r.mutable_k() = RandomTensor(rng, t, {2, 8}, 4);
  *r.mutable_v() = RandomTensor(rng, t, {4, 8}, 4);
  *r.mutable_g() = RandomTensor(rng, t, {4}, 4);
  *r.mutable_beta() = RandomTensor(rng, t, {4}, 4);
  return r;
}

TEST(ForwardSplitTest, SmallRequestIsOnePart) {
  const v1::ForwardRequest r = RandomRequest({3, 1, 5}, 1);
  absl::StatusOr<std::vector<ForwardPart>> parts = SplitForwardRequest(r, 4 << 20);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].request.SerializeAsString(), r.SerializeAsString());
  EXPECT_EQ((*parts)[0].original_sequence, (std::vector<int>{0, 1, 2}));
}

// Parts fit the limit, carry every row exactly once in order, and continue
// each session's position where the previous part left it.
TEST(ForwardSplitTest, PartsCoverTheRequestInOrder) {
  const std::vector<int> tokens = {700, 3, 1, 1200, 45};
  const v1::ForwardRequest r = RandomRequest(tokens, 2);
  const int64_t limit = kForwardMessageSlackBytes + 100 * 1024;
  absl::StatusOr<std::vector<ForwardPart>> parts = SplitForwardRequest(r, limit);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_GT(parts->size(), 3u);

  std::string q, v, beta;
  std::vector<int64_t> next_position(tokens.size());
  std::vector<int64_t> seen_tokens(tokens.size(), 0);
  for (size_t i = 0; i < tokens.size(); ++i) next_position[i] = r.sequences(i).position();
  int last_seq = 0;
  for (const ForwardPart& p : *parts) {
    EXPECT_LE(static_cast<int64_t>(p.request.ByteSizeLong()), limit);
    EXPECT_EQ(p.request.layer(), 3);
    int64_t rows = 0;
    ASSERT_EQ(p.original_sequence.size(), static_cast<size_t>(p.request.sequences_size()));
    for (int i = 0; i < p.request.sequences_size(); ++i) {
      const int orig = p.original_sequence[i];
      EXPECT_GE(orig, last_seq);  // sequences keep their order
      last_seq = orig;
      const v1::SequenceSpec& s = p.request.sequences(i);
      EXPECT_EQ(s.session_id(), r.sequences(orig).session_id());
      EXPECT_EQ(s.position(), next_position[orig]);
      EXPECT_GE(s.num_tokens(), 1);
      next_position[orig] += s.num_tokens();
      seen_tokens[orig] += s.num_tokens();
      rows += s.num_tokens();
    }
    EXPECT_EQ(p.request.q().shape(0), rows);
    EXPECT_EQ(p.request.q().shape(1), 2);
    EXPECT_EQ(p.request.v().shape(0), rows);
    q += p.request.q().data();
    v += p.request.v().data();
    beta += p.request.beta().data();
  }
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(seen_tokens[i], tokens[i]);
  EXPECT_EQ(q, r.q().data());
  EXPECT_EQ(v, r.v().data());
  EXPECT_EQ(beta, r.beta().data());
}

TEST(ForwardSplitTest, MergeConcatenatesOAndTakesLastPositions) {
  const std::vector<int> tokens = {300, 2, 500};
  const v1::ForwardRequest r = RandomRequest(tokens, 3);
  absl::StatusOr<std::vector<ForwardPart>> parts =
      SplitForwardRequest(r, kForwardMessageSlackBytes + 30 * 1024);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_GT(parts->size(), 2u);
  // Responses as a server would send them: o rows like v's, new positions.
  std::vector<v1::ForwardResponse> responses;
  std::string want_o;
  std::mt19937_64 rng(9);
  for (const ForwardPart& p : *parts) {
    v1::ForwardResponse resp;
    *resp.mutable_o() = RandomTensor(rng, p.request.v().shape(0), {4, 8}, 4);
    want_o += resp.o().data();
    for (const v1::SequenceSpec& s : p.request.sequences()) {
      resp.add_positions(s.position() + s.num_tokens());
    }
    responses.push_back(resp);
  }
  absl::StatusOr<v1::ForwardResponse> merged = MergeForwardResponses(r, *parts, responses);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->o().data(), want_o);
  EXPECT_EQ(merged->o().shape(0), 802);
  EXPECT_EQ(merged->request_id(), 77u);
  ASSERT_EQ(merged->positions_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(merged->positions(i), r.sequences(i).position() + tokens[i]);
  }
}

TEST(ForwardSplitTest, RejectsWhatCannotBeSplit) {
  v1::ForwardRequest r = RandomRequest({40, 40}, 4);
  // One token larger than the message.
  EXPECT_EQ(SplitForwardRequest(r, 1024).status().code(), absl::StatusCode::kInvalidArgument);
  // Rows that do not match T.
  r.mutable_q()->mutable_data()->append("xyz");
  EXPECT_EQ(SplitForwardRequest(r, kForwardMessageSlackBytes + 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gdn::client
