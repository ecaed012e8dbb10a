// The v8 span path's host plan (kernels/cuda/chunked/span_plan.h): span
// counts for FlashQLA's few-heads rows on the H200's 132 SMs, bounds on
// whole chunks covering the sequence, forced counts, and the page-id and
// sequence arrays of the three calls. No device needed.
#include "kernels/cuda/chunked/span_plan.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gdn_params.h"

namespace gdn::cuda::chunked {
namespace {

void ExpectWellFormed(const SpanPlan& plan, int64_t tokens) {
  ASSERT_GE(plan.spans(), 1);
  EXPECT_EQ(plan.bounds.front(), 0);
  EXPECT_EQ(plan.bounds.back(), tokens);
  for (int p = 1; p < plan.spans(); ++p) {
    EXPECT_GT(plan.bounds[p], plan.bounds[p - 1]) << "span " << p - 1 << " is empty";
    EXPECT_EQ(plan.bounds[p] % 64, 0) << "bound " << p << " cuts a chunk";
  }
  EXPECT_GT(plan.bounds.back(), plan.bounds[plan.spans() - 1]) << "the last span is empty";
}

TEST(SpanPlanTest, PlannedCountsFillOneWaveWithBothPhases) {
  struct Row {
    int hv;
    int64_t tokens;
    int spans;
  };
  // 16/32 1 x 32768: 2 (P - 1) 32 <= 132 -> 3; 2/8: 9; 16 heads: 5; 64
  // heads: no P >= 3 fits one wave; 1 x 2048 at 32 heads: spans under 16
  // chunks.
  for (const Row& row : {Row{32, 32768, 3}, Row{8, 32768, 9}, Row{16, 32768, 5},
                         Row{64, 32768, 1}, Row{32, 2048, 1}, Row{8, 131072, 9},
                         Row{8, 3 * 64 * kMinSpanChunks, 3}}) {
    SCOPED_TRACE(testing::Message() << row.hv << " heads, " << row.tokens << " tokens");
    const SpanPlan plan = PlanSpans(row.tokens, row.hv, 132, 0);
    ExpectWellFormed(plan, row.tokens);
    EXPECT_EQ(plan.spans(), row.spans);
    if (plan.spans() > 1) {
      EXPECT_LE(2 * (plan.spans() - 1) * row.hv, 132);
      EXPECT_LE(plan.spans() * row.hv, 132);
    }
  }
}

TEST(SpanPlanTest, ChunksSharedOutEvenlyAndThePartialChunkLast) {
  // 1000 tokens = 15 whole chunks + 40 tokens: 16 chunks over 3 spans ->
  // 6, 5, 5 chunks.
  const SpanPlan plan = PlanSpans(1000, 4, 132, 3);
  ExpectWellFormed(plan, 1000);
  EXPECT_EQ(plan.bounds, (std::vector<int32_t>{0, 384, 704, 1000}));
}

TEST(SpanPlanTest, ForcedCountsCapAtTheChunks) {
  EXPECT_EQ(PlanSpans(32768, 32, 132, 7).spans(), 7);
  ExpectWellFormed(PlanSpans(32768 + 17, 32, 132, 7), 32768 + 17);
  // Three chunks (the last partial) take at most three spans.
  const SpanPlan three = PlanSpans(130, 32, 132, 8);
  ExpectWellFormed(three, 130);
  EXPECT_EQ(three.bounds, (std::vector<int32_t>{0, 64, 128, 130}));
  EXPECT_EQ(PlanSpans(64, 32, 132, 4).spans(), 1);
  EXPECT_EQ(PlanSpans(0, 32, 132, 0).spans(), 1);
  EXPECT_EQ(PlanSpans(1000, 0, 132, 0).spans(), 1);
}

TEST(SpanPlanTest, ArraysOfTheThreeCalls) {
  const SpanPlan plan = PlanSpans(1000, 4, 132, 3);
  const SpanArrays a = MakeSpanArrays(plan);
  const SpanPages pages{3};
  auto at = [&a](int offset, int n) {
    return std::vector<int32_t>(a.data.begin() + offset, a.data.begin() + offset + n);
  };
  EXPECT_EQ(at(a.cu_head, 3), (std::vector<int32_t>{0, 384, 704}));
  EXPECT_EQ(at(a.cu_all, 4), (std::vector<int32_t>{0, 384, 704, 1000}));
  EXPECT_EQ(at(a.zero_init, 2), (std::vector<int32_t>{kZeroStatePage, kZeroStatePage}));
  EXPECT_EQ(at(a.identity, 2), (std::vector<int32_t>{pages.identity(), pages.identity()}));
  EXPECT_EQ(at(a.ends, 3), (std::vector<int32_t>{pages.n(0), pages.n(1), pages.last()}));
  // N, M, Z, the last end and the identity: distinct pages of the scratch pool.
  std::set<int32_t> ids;
  for (int p = 0; p < 2; ++p) ids.insert({pages.n(p), pages.m(p)});
  for (int p = 0; p < 3; ++p) ids.insert(pages.z(p));
  ids.insert({pages.last(), pages.identity()});
  EXPECT_EQ(ids.size(), static_cast<size_t>(pages.count()));
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), pages.count() - 1);
  EXPECT_EQ(at(a.n_pages, 2), (std::vector<int32_t>{pages.n(0), pages.n(1)}));
  EXPECT_EQ(at(a.m_pages, 2), (std::vector<int32_t>{pages.m(0), pages.m(1)}));
  EXPECT_EQ(at(a.z_pages, 3), (std::vector<int32_t>{pages.z(0), pages.z(1), pages.z(2)}));
  EXPECT_EQ(a.data.size(), static_cast<size_t>(a.ends + 3));
}

}  // namespace
}  // namespace gdn::cuda::chunked
