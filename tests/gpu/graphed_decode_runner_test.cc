// kernels/decode_runner on the cuda backend, the way the server uses it: one
// fixed set of staging buffers, batches of 1, 3, 17, 64, ... sessions with
// 1..8 tokens padded to their bucket and replayed as CUDA graphs, many steps
// in place over a pool of pages. Against the direct (non-graph) runner on a
// twin pool and the float64 oracle, step by step; no page other than the
// batch's own pages may change (padding writes no page at all).
#include "kernels/decode_runner.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dtype_convert.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {

constexpr int kMaxSeqs = 64;
constexpr int kSessions = 80;  // pages 0..79; pages 80..83 are never used
constexpr int kPages = kSessions + 4;

// One pool plus engine-like staging (device buffers sized once for the
// largest bucket of 8-token sequences; pointers never change).
struct Lane {
  Backend* backend = nullptr;
  void* pool = nullptr;
  void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *g = nullptr, *beta = nullptr;
  int32_t *cu = nullptr, *initial = nullptr, *final_pages = nullptr;
  ~Lane() {
    for (void* p : {pool, q, k, v, o, g, beta, static_cast<void*>(cu),
                    static_cast<void*>(initial), static_cast<void*>(final_pages)}) {
      if (p != nullptr) backend->Free(p);
    }
  }
};

absl::Status AllocLane(Backend& backend, const GdnOptions& options, int64_t page_bytes,
                       Lane* lane) {
  const LayerShape& s = options.shape;
  const size_t tokens = size_t{kMaxSeqs} * kMaxDecodeTokens;
  const size_t es = DTypeSize(options.input_dtype);
  lane->backend = &backend;
  auto alloc = [&](void** p, size_t bytes) -> absl::Status {
    absl::StatusOr<void*> ptr = backend.Allocate(bytes);
    if (!ptr.ok()) return ptr.status();
    *p = *ptr;
    return absl::OkStatus();
  };
  for (auto [ptr, bytes] : std::vector<std::pair<void**, size_t>>{
           {&lane->pool, size_t(page_bytes) * kPages},
           {&lane->q, tokens * s.num_qk_heads * s.head_dim_k * es},
           {&lane->k, tokens * s.num_qk_heads * s.head_dim_k * es},
           {&lane->v, tokens * s.num_v_heads * s.head_dim_v * es},
           {&lane->o, tokens * s.num_v_heads * s.head_dim_v * es},
           {&lane->g, tokens * s.num_v_heads * 4},
           {&lane->beta, tokens * s.num_v_heads * 4},
           {reinterpret_cast<void**>(&lane->cu), (kMaxSeqs + 1) * 4},
           {reinterpret_cast<void**>(&lane->initial), kMaxSeqs * 4},
           {reinterpret_cast<void**>(&lane->final_pages), kMaxSeqs * 4}}) {
    if (absl::Status st = alloc(ptr, bytes); !st.ok()) return st;
  }
  return absl::OkStatus();
}

std::vector<uint8_t> ReadBytes(Backend& backend, const void* src, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  EXPECT_TRUE(backend.CopyToHost(out.data(), src, bytes).ok());
  EXPECT_TRUE(backend.Synchronize().ok());
  return out;
}

// Stages `in` (n real sequences, padded to `padded`) into the lane and
// returns the params; `pages[i]` is sequence i's page (in place), or a zero
// initial state where `fresh[i]`.
GdnParams Stage(Backend& backend, const GdnOptions& options, const StatePageLayout& layout,
                Lane& lane, const oracle::Inputs& in, const std::vector<int32_t>& pages,
                const std::vector<bool>& fresh, int padded, std::vector<int32_t>* cu_host) {
  const LayerShape& s = options.shape;
  const int n = static_cast<int>(pages.size());
  const int real_t = in.cu_seqlens[n];
  const int t = real_t + (padded - n);
  const size_t es = DTypeSize(options.input_dtype);
  auto put = [&](void* dst, const std::vector<float>& values, size_t row_elems, bool convert) {
    std::vector<uint8_t> bytes(size_t(t) * row_elems * (convert ? es : 4), 0);  // pad rows 0
    if (convert) {
      ConvertFromFloat(values.data(), values.size(), options.input_dtype, bytes.data());
    } else {
      std::memcpy(bytes.data(), values.data(), values.size() * 4);
    }
    EXPECT_TRUE(backend.CopyToDevice(dst, bytes.data(), bytes.size()).ok());
    EXPECT_TRUE(backend.Synchronize().ok());
  };
  put(lane.q, in.q, size_t(s.num_qk_heads) * s.head_dim_k, true);
  put(lane.k, in.k, size_t(s.num_qk_heads) * s.head_dim_k, true);
  put(lane.v, in.v, size_t(s.num_v_heads) * s.head_dim_v, true);
  put(lane.g, in.g, s.num_v_heads, false);
  put(lane.beta, in.beta, s.num_v_heads, false);
  cu_host->assign(in.cu_seqlens.begin(), in.cu_seqlens.end());
  cu_host->resize(padded + 1);
  std::vector<int32_t> initial(padded), final_pages(padded);
  for (int i = 0; i < n; ++i) {
    initial[i] = fresh[i] ? kZeroStatePage : pages[i];
    final_pages[i] = pages[i];
  }
  EXPECT_EQ(AppendDecodePadding(n, padded, kDiscardPage, cu_host->data(), initial.data(),
                                final_pages.data()),
            t);
  EXPECT_TRUE(backend.CopyToDevice(lane.cu, cu_host->data(), (padded + 1) * 4).ok());
  EXPECT_TRUE(backend.CopyToDevice(lane.initial, initial.data(), padded * 4).ok());
  EXPECT_TRUE(backend.CopyToDevice(lane.final_pages, final_pages.data(), padded * 4).ok());
  EXPECT_TRUE(backend.Synchronize().ok());
  GdnParams p;
  p.num_seqs = padded;
  p.total_tokens = t;
  p.cu_seqlens = lane.cu;
  p.cu_seqlens_host = cu_host->data();
  p.q = lane.q;
  p.k = lane.k;
  p.v = lane.v;
  p.o = lane.o;
  p.g = static_cast<const float*>(lane.g);
  p.beta = static_cast<const float*>(lane.beta);
  p.initial_pages = lane.initial;
  p.final_pages = lane.final_pages;
  p.pool.base = lane.pool;
  p.pool.page_bytes = layout.page_bytes;
  p.pool.num_pages = kPages;
  p.pool.dtype = options.state_dtype;
  return p;
}

std::vector<float> PageAsFloats(const GdnOptions& options, const StatePageLayout& layout,
                                const std::vector<uint8_t>& pool, int page) {
  const LayerShape& s = options.shape;
  const size_t n = size_t(s.num_v_heads) * s.head_dim_k * s.head_dim_v;
  std::vector<float> out(n);
  ConvertToFloat(pool.data() + size_t(layout.page_bytes) * page,
                 options.state_dtype == StateDType::kF32 ? DType::kF32 : DType::kBF16, n,
                 out.data());
  return out;
}

TEST_F(CudaBackendTest, GraphedRunnerMatchesDirectRunnerAndOracleOverManySteps) {
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat("seed ", seed, " state ", StateDTypeName(st)));
    std::mt19937_64 rng(seed);
    GdnOptions options;
    options.shape = {4, 8, 128, 128};
    options.input_dtype = DType::kBF16;
    options.state_dtype = st;
    options.gating = GatingMode::kDirect;
    options.l2_norm_qk = true;
    const StatePageLayout layout = StatePageLayout::For(options.shape, st);

    DecodeRunnerConfig config;
    config.use_graphs = true;
    config.max_seqs = kMaxSeqs;
    auto graphed = CreateDecodeRunner(*backend_, options, config);
    ASSERT_TRUE(graphed.ok()) << graphed.status();
    ASSERT_TRUE((*graphed)->graphed());
    config.use_graphs = false;
    auto direct = CreateDecodeRunner(*backend_, options, config);
    ASSERT_TRUE(direct.ok()) << direct.status();
    ASSERT_FALSE((*direct)->graphed());

    Lane a, b;  // a: graphed, b: direct
    ASSERT_TRUE(AllocLane(*backend_, options, layout.page_bytes, &a).ok());
    ASSERT_TRUE(AllocLane(*backend_, options, layout.page_bytes, &b).ok());
    {
      // Random pages (never zeros), identical in both pools.
      const size_t elems = size_t(layout.page_bytes) * kPages / (st == StateDType::kF32 ? 4 : 2);
      std::vector<float> values(elems);
      std::normal_distribution<float> normal(0.0f, 0.05f);
      for (float& x : values) x = normal(rng);
      std::vector<uint8_t> bytes(size_t(layout.page_bytes) * kPages);
      ConvertFromFloat(values.data(), elems, st == StateDType::kF32 ? DType::kF32 : DType::kBF16,
                       bytes.data());
      ASSERT_TRUE(backend_->CopyToDevice(a.pool, bytes.data(), bytes.size()).ok());
      ASSERT_TRUE(backend_->CopyToDevice(b.pool, bytes.data(), bytes.size()).ok());
      ASSERT_TRUE(backend_->Synchronize().ok());
    }
    std::vector<bool> written(kSessions, false);  // a session's page holds a state

    const int sizes[] = {1, 3, 17, 64, 2, 33, 5, 64, 1, 9, 17, 3, 64, 1, 40, 8};
    std::set<int> buckets_used;
    int steps = 0;
    for (int round = 0; round < 3; ++round) {
      for (int n : sizes) {
        SCOPED_TRACE(absl::StrCat("step ", steps, " n=", n));
        std::vector<int32_t> pages(kSessions);
        std::iota(pages.begin(), pages.end(), 0);
        std::shuffle(pages.begin(), pages.end(), rng);
        pages.resize(n);
        std::vector<int> lens(n);
        for (int& l : lens) l = rng() % 3 == 0 ? 1 + int(rng() % kMaxDecodeTokens) : 1;
        std::vector<bool> fresh(n);
        oracle::Inputs in = testing::MakeRandomInputs(options, lens, rng(), false);
        const std::vector<uint8_t> before = ReadBytes(*backend_, a.pool, size_t(layout.page_bytes) * kPages);
        in.initial_states.assign(n, {});
        for (int i = 0; i < n; ++i) {
          fresh[i] = !written[pages[i]] && rng() % 2 == 0;  // some start from zero
          if (!fresh[i]) in.initial_states[i] = PageAsFloats(options, layout, before, pages[i]);
        }
        const int padded = (*graphed)->PaddedSeqs(n);
        EXPECT_EQ(padded, DecodeBucket(n, kMaxSeqs));
        buckets_used.insert(padded);
        std::vector<int32_t> cu_a, cu_b;
        const GdnParams pa = Stage(*backend_, options, layout, a, in, pages, fresh, padded, &cu_a);
        const GdnParams pb = Stage(*backend_, options, layout, b, in, pages, fresh, n, &cu_b);
        ASSERT_TRUE((*graphed)->Run(pa).ok());
        ASSERT_TRUE((*direct)->Run(pb).ok());
        ASSERT_TRUE(backend_->Synchronize().ok());
        for (int i = 0; i < n; ++i) written[pages[i]] = true;

        const oracle::Outputs want = oracle::Run(options, in);
        const size_t o_elems = want.o.size();
        auto o_a = ReadOutput(*backend_, options, pa);  // padded rows at the end
        auto o_b = ReadOutput(*backend_, options, pb);
        ASSERT_TRUE(o_a.ok() && o_b.ok());
        const auto err_a = testing::Compare(o_a->data(), want.o.data(), o_elems);
        const auto err_b = testing::Compare(o_b->data(), want.o.data(), o_elems);
        EXPECT_EQ(err_a.nonfinite, 0);
        EXPECT_LE(err_a.max_abs_rel, OutputTolerance(options)) << testing::ToString(err_a);
        EXPECT_LE(err_b.max_abs_rel, OutputTolerance(options)) << testing::ToString(err_b);
        // Graph vs direct: the same kernels up to the variant the bucket
        // resolves to (summation order), so within fp32 noise of each other
        // before o's rounding.
        std::vector<double> o_b_ref(o_b->begin(), o_b->begin() + o_elems);
        EXPECT_LE(testing::Compare(o_a->data(), o_b_ref.data(), o_elems).max_abs_rel,
                  OutputTolerance(options));

        const std::vector<uint8_t> after_a =
            ReadBytes(*backend_, a.pool, size_t(layout.page_bytes) * kPages);
        const std::vector<uint8_t> after_b =
            ReadBytes(*backend_, b.pool, size_t(layout.page_bytes) * kPages);
        std::vector<bool> in_batch(kPages, false);
        for (int i = 0; i < n; ++i) in_batch[pages[i]] = true;
        for (int page = 0; page < kPages; ++page) {
          const size_t off = size_t(layout.page_bytes) * page;
          if (!in_batch[page]) {
            EXPECT_EQ(std::memcmp(after_a.data() + off, before.data() + off, layout.page_bytes), 0)
                << "graphed run wrote page " << page << ", not in the batch";
          }
        }
        for (int i = 0; i < n; ++i) {
          const std::vector<float> got = PageAsFloats(options, layout, after_a, pages[i]);
          const std::vector<float> twin = PageAsFloats(options, layout, after_b, pages[i]);
          const auto s_err = testing::Compare(got.data(), want.final_states[i].data(), got.size());
          EXPECT_LE(s_err.max_abs_rel, StateTolerance(options)) << "seq " << i;
          std::vector<double> twin_ref(twin.begin(), twin.end());
          EXPECT_LE(testing::Compare(got.data(), twin_ref.data(), got.size()).max_abs_rel,
                    StateTolerance(options))
              << "graphed vs direct, seq " << i;
        }
        // Keep the twin pool identical to the graphed one, so both start
        // every step from the same states.
        ASSERT_TRUE(backend_->CopyOnDevice(b.pool, a.pool, size_t(layout.page_bytes) * kPages).ok());
        ASSERT_TRUE(backend_->Synchronize().ok());
        ++steps;
      }
    }
    const DecodeRunnerStats gs = (*graphed)->stats();
    EXPECT_EQ(gs.graph_captures, buckets_used.size());
    EXPECT_EQ(gs.graph_replays, static_cast<uint64_t>(steps));
    EXPECT_EQ(gs.direct_runs, 0u);
    EXPECT_EQ((*direct)->stats().direct_runs, static_cast<uint64_t>(steps));
    std::printf("[decode_runner] state %s: %d steps, %zu buckets captured, %llu replays\n",
                StateDTypeName(st).data(), steps, buckets_used.size(),
                static_cast<unsigned long long>(gs.graph_replays));
  }
}

// New staging pointers recapture (the engine's staging grew); a batch larger
// than the largest bucket runs directly.
TEST_F(CudaBackendTest, GraphedRunnerRecapturesWhenStagingMovesAndRunsBigBatchesDirectly) {
  GdnOptions options;
  options.shape = {2, 4, 64, 64};
  options.input_dtype = DType::kBF16;
  options.state_dtype = StateDType::kF32;
  DecodeRunnerConfig config;
  config.max_seqs = 4;
  auto runner = CreateDecodeRunner(*backend_, options, config);
  ASSERT_TRUE(runner.ok()) << runner.status();
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  // Every call's buffers stay allocated to the end, so the allocator cannot
  // hand the same addresses out again.
  std::vector<std::unique_ptr<testing::StagedCall>> calls;
  auto run = [&](int n) {
    std::vector<int> lens(n, 1);
    oracle::Inputs in = testing::MakeRandomInputs(options, lens, seed + n, true);
    auto call = testing::StagedCall::Create(*backend_, options, in);  // fresh buffers
    ASSERT_TRUE(call.ok()) << call.status();
    calls.push_back(*std::move(call));
    testing::StagedCall* staged = calls.back().get();
    ASSERT_TRUE((*runner)->Run(staged->params()).ok());
    ASSERT_TRUE(backend_->Synchronize().ok());
    auto got = staged->Fetch();
    ASSERT_TRUE(got.ok()) << got.status();
    const oracle::Outputs want = oracle::Run(options, in);
    EXPECT_LE(testing::Compare(got->o.data(), want.o.data(), want.o.size()).max_abs_rel,
              OutputTolerance(options));
  };
  run(4);
  run(4);  // other buffers: captured again
  run(7);  // > max_seqs: direct
  const DecodeRunnerStats s = (*runner)->stats();
  EXPECT_EQ(s.graph_captures, 2u);
  EXPECT_EQ(s.graph_replays, 2u);
  EXPECT_EQ(s.direct_runs, 1u);
}

}  // namespace
}  // namespace gdn::gpu_test
