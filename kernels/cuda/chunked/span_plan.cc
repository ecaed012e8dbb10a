#include "kernels/cuda/chunked/span_plan.h"

#include <algorithm>

#include "kernels/gdn_params.h"

namespace gdn::cuda::chunked {
namespace {

constexpr int64_t kChunkTokens = 64;

SpanPlan Even(int64_t tokens, int64_t chunks, int spans) {
  SpanPlan plan;
  plan.bounds.push_back(0);
  int64_t at = 0;
  for (int p = 0; p < spans; ++p) {
    at += chunks / spans + (p < chunks % spans ? 1 : 0);
    plan.bounds.push_back(static_cast<int32_t>(std::min(tokens, at * kChunkTokens)));
  }
  return plan;
}

}  // namespace

SpanPlan PlanSpans(int64_t tokens, int num_v_heads, int sm_count, int forced_spans) {
  if (tokens <= 0) return SpanPlan{{0, 0}};
  const int64_t chunks = (tokens + kChunkTokens - 1) / kChunkTokens;
  if (forced_spans > 0) {
    return Even(tokens, chunks, static_cast<int>(std::min<int64_t>(forced_spans, chunks)));
  }
  int spans = 1;
  for (int p = 3; num_v_heads > 0; ++p) {
    const bool one_wave =
        int64_t{2} * (p - 1) * num_v_heads <= sm_count && int64_t{p} * num_v_heads <= sm_count;
    if (!one_wave || chunks / p < kMinSpanChunks) break;
    spans = p;
  }
  return Even(tokens, chunks, spans);
}

SpanArrays MakeSpanArrays(const SpanPlan& plan) {
  const int P = plan.spans();
  const SpanPages pages{P};
  SpanArrays a;
  auto start = [&a](int* offset) { *offset = static_cast<int>(a.data.size()); };
  start(&a.cu_head);
  for (int p = 0; p < P; ++p) a.data.push_back(plan.bounds[p]);
  start(&a.cu_all);
  for (int p = 0; p <= P; ++p) a.data.push_back(plan.bounds[p]);
  start(&a.zero_init);
  for (int p = 0; p + 1 < P; ++p) a.data.push_back(kZeroStatePage);
  start(&a.n_pages);
  for (int p = 0; p + 1 < P; ++p) a.data.push_back(pages.n(p));
  start(&a.identity);
  for (int p = 0; p + 1 < P; ++p) a.data.push_back(pages.identity());
  start(&a.m_pages);
  for (int p = 0; p + 1 < P; ++p) a.data.push_back(pages.m(p));
  start(&a.z_pages);
  for (int p = 0; p < P; ++p) a.data.push_back(pages.z(p));
  start(&a.ends);
  for (int p = 0; p + 1 < P; ++p) a.data.push_back(pages.n(p));
  a.data.push_back(pages.last());
  return a;
}

}  // namespace gdn::cuda::chunked
