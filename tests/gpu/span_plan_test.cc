// The v8 span path's host plan (kernels/cuda/chunked/span_plan.h): span
// counts for FlashQLA's few-heads rows on the H200's 132 SMs, bounds on
// whole chunks (whole checkpoint intervals with prefix states) covering the
// sequence, forced counts, the page-id and
// sequence arrays of the three calls, and those calls composed exactly as
// the cuda path composes them but run by the float64 oracle: they give the
// whole sequence's o and final state. No device needed.
#include "kernels/cuda/chunked/span_plan.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gdn_params.h"
#include "kernels/oracle/gdn_oracle.h"
#include "kernels/testing/gdn_test_inputs.h"

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
    SCOPED_TRACE(::testing::Message() << row.hv << " heads, " << row.tokens << " tokens");
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

// With prefix states every unit of chunks (SpanUnitChunks of the
// interval) every inner bound is a whole number of units, planned or forced.
TEST(SpanPlanTest, UnitsOfCheckpointIntervals) {
  EXPECT_EQ(SpanUnitChunks(0), 1);
  EXPECT_EQ(SpanUnitChunks(64), 1);
  EXPECT_EQ(SpanUnitChunks(192), 3);
  EXPECT_EQ(SpanUnitChunks(kPerTokenStates), 1);
  // 1000 tokens in units of 192: 5 whole units and 40 tokens, 2 + 2 + 2.
  EXPECT_EQ(PlanSpans(1000, 4, 132, 3, 3).bounds, (std::vector<int32_t>{0, 384, 768, 1000}));
  // Four units of 256 take at most four spans.
  EXPECT_EQ(PlanSpans(1000, 4, 132, 8, 4).bounds,
            (std::vector<int32_t>{0, 256, 512, 768, 1000}));
  // Planned: 16/32 1 x 32768 at 4096 tokens still cuts 3 spans (3 + 3 + 2
  // units); 2/8 at 8192 has 4 units for the 9 spans its heads allow.
  EXPECT_EQ(PlanSpans(32768, 32, 132, 0, 64).bounds,
            (std::vector<int32_t>{0, 12288, 24576, 32768}));
  const SpanPlan four = PlanSpans(32768, 8, 132, 0, 128);
  EXPECT_EQ(four.spans(), 4);
  for (int unit : {1, 2, 5, 7}) {
    for (int64_t tokens : {int64_t{8192}, int64_t{32768 + 17}, int64_t{5000}}) {
      SCOPED_TRACE(::testing::Message() << unit << " chunks a unit, " << tokens << " tokens");
      for (int forced : {0, 3, 6}) {
        const SpanPlan plan = PlanSpans(tokens, 8, 132, forced, unit);
        ExpectWellFormed(plan, tokens);
        for (int p = 1; p < plan.spans(); ++p) EXPECT_EQ(plan.bounds[p] % (64 * unit), 0);
      }
    }
  }
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

// The scratch pool of SpanPages, one float64 [Hv][K][V] state per page.
using Pool = std::vector<std::vector<double>>;

// The calls of one span phase, run by the oracle: sequences cu[0..n] of
// `in`'s tokens (v zeroed with zero_v), initial states from `pool` by
// init_ids (kZeroStatePage: zero), final states into `pool` by end_ids.
// Returns o of those tokens.
std::vector<double> RunPhase(const GdnOptions& options, const oracle::Inputs& in,
                             const SpanArrays& a, int cu, int n, int init_ids, int end_ids,
                             bool zero_v, Pool* pool) {
  oracle::Inputs call = in;
  call.cu_seqlens.assign(a.data.begin() + cu, a.data.begin() + cu + n + 1);
  const int64_t tokens = call.cu_seqlens.back();
  const int64_t qk = int64_t{options.shape.num_qk_heads} * options.shape.head_dim_k;
  const int64_t vv = int64_t{options.shape.num_v_heads} * options.shape.head_dim_v;
  const int64_t hv = options.shape.num_v_heads;
  call.q.resize(tokens * qk);
  call.k.resize(tokens * qk);
  call.v.resize(tokens * vv);
  if (zero_v) std::fill(call.v.begin(), call.v.end(), 0.0f);
  call.g.resize(tokens * hv);
  call.beta.resize(tokens * hv);
  call.initial_states.clear();
  for (int s = 0; s < n; ++s) {
    const int32_t id = a.data[init_ids + s];
    if (id == kZeroStatePage) {
      call.initial_states.emplace_back();
    } else {
      call.initial_states.emplace_back((*pool)[id].begin(), (*pool)[id].end());
    }
  }
  oracle::Outputs out = oracle::Run(options, call);
  for (int s = 0; s < n; ++s) (*pool)[a.data[end_ids + s]] = out.final_states[s];
  return out.o;
}

TEST(SpanPlanTest, SpansComposeToTheWholeSequence) {
  GdnOptions options;
  options.shape = {1, 2, 8, 8};  // K = V (the identity start); small for the oracle
  options.input_dtype = DType::kF32;
  options.gating = GatingMode::kDirect;
  for (int spans : {2, 3, 5}) {
    for (bool stored_start : {true, false}) {
      SCOPED_TRACE(::testing::Message() << spans << " spans, stored start " << stored_start);
      oracle::Inputs in = gdn::testing::MakeRandomInputs(options, {1000}, 7 + spans,
                                                         stored_start);
      // No decay and small betas: each span's M stays far from zero (and
      // from symmetric), so a transposed or misplaced M would show.
      std::fill(in.g.begin(), in.g.end(), 0.0f);
      for (float& b : in.beta) b *= 0.02f;
      const oracle::Outputs whole = oracle::Run(options, in);
      const SpanPlan plan = PlanSpans(1000, 2, 132, spans);
      ASSERT_EQ(plan.spans(), spans);
      const SpanArrays a = MakeSpanArrays(plan);
      const SpanPages pages{spans};
      const int64_t dim = 8, state = 2 * dim * dim;
      Pool pool(pages.count(), std::vector<double>(state, std::nan("")));
      pool[pages.identity()].assign(state, 0.0);
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t d = 0; d < dim; ++d) pool[pages.identity()][h * dim * dim + d * dim + d] = 1;
      }
      // Phase 1: N runs, M runs (identity start, v = 0).
      RunPhase(options, in, a, a.cu_head, spans - 1, a.zero_init, a.n_pages, false, &pool);
      RunPhase(options, in, a, a.cu_head, spans - 1, a.identity, a.m_pages, true, &pool);
      // Phase 2, as SpanFixupKernel: Z_{p+1}[d][e] = sum_j M_p[d][j] Z_p[j][e] + N_p[d][e].
      pool[pages.z(0)] = in.initial_states[0].empty()
                             ? std::vector<double>(state, 0.0)
                             : std::vector<double>(in.initial_states[0].begin(),
                                                   in.initial_states[0].end());
      for (int p = 0; p + 1 < spans; ++p) {
        std::vector<double>& next = pool[pages.z(p + 1)];
        const std::vector<double>&z = pool[pages.z(p)], &m = pool[pages.m(p)],
                                  &n = pool[pages.n(p)];
        for (int64_t h = 0; h < 2; ++h) {
          for (int64_t d = 0; d < dim; ++d) {
            for (int64_t e = 0; e < dim; ++e) {
              double acc = n[h * dim * dim + d * dim + e];
              for (int64_t j = 0; j < dim; ++j) {
                acc += m[h * dim * dim + d * dim + j] * z[h * dim * dim + j * dim + e];
              }
              next[h * dim * dim + d * dim + e] = acc;
            }
          }
        }
      }
      // Phase 3: every span from its Z_p; the last end is the final state.
      const std::vector<double> o =
          RunPhase(options, in, a, a.cu_all, spans, a.z_pages, a.ends, false, &pool);
      ASSERT_EQ(o.size(), whole.o.size());
      double o_err = 0, o_max = 0, s_err = 0, s_max = 0;
      for (size_t i = 0; i < o.size(); ++i) {
        o_err = std::max(o_err, std::fabs(o[i] - whole.o[i]));
        o_max = std::max(o_max, std::fabs(whole.o[i]));
      }
      for (int64_t i = 0; i < state; ++i) {
        s_err = std::max(s_err, std::fabs(pool[pages.last()][i] - whole.final_states[0][i]));
        s_max = std::max(s_max, std::fabs(whole.final_states[0][i]));
      }
      // The oracle takes start states in fp32: phase 3's Z_p are rounded once
      // (2^-24), so o and the final state agree to ~1e-8, not to float64's
      // 1e-16; a wrong composition would be off by O(1).
      EXPECT_LE(o_err, 1e-6 * o_max);
      EXPECT_LE(s_err, 1e-6 * s_max);
    }
  }
}

}  // namespace
}  // namespace gdn::cuda::chunked
