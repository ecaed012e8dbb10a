#include "kernels/cuda/chunked/span_plan.h"

#include <algorithm>

#include "kernels/gdn_params.h"

namespace gdn::cuda::chunked {
namespace {

constexpr int64_t kChunkTokens = 64;

// `units` units of unit_tokens (the last one partial) over `spans` spans.
SpanPlan Even(int64_t tokens, int64_t units, int64_t unit_tokens, int spans) {
  SpanPlan plan;
  plan.bounds.push_back(0);
  int64_t at = 0;
  for (int p = 0; p < spans; ++p) {
    at += units / spans + (p < units % spans ? 1 : 0);
    plan.bounds.push_back(static_cast<int32_t>(std::min(tokens, at * unit_tokens)));
  }
  return plan;
}

}  // namespace

SpanPlan PlanSpans(int64_t tokens, int num_v_heads, int sm_count, int forced_spans,
                   int unit_chunks) {
  if (tokens <= 0) return SpanPlan{{0, 0}};
  const int64_t unit_tokens = kChunkTokens * std::max(unit_chunks, 1);
  const int64_t chunks = (tokens + kChunkTokens - 1) / kChunkTokens;
  const int64_t units = (tokens + unit_tokens - 1) / unit_tokens;
  if (forced_spans > 0) {
    return Even(tokens, units, unit_tokens,
                static_cast<int>(std::min<int64_t>(forced_spans, units)));
  }
  int spans = 1;
  for (int p = 3; num_v_heads > 0; ++p) {
    const bool one_wave =
        int64_t{2} * (p - 1) * num_v_heads <= sm_count && int64_t{p} * num_v_heads <= sm_count;
    if (!one_wave || chunks / p < kMinSpanChunks || units < p) break;
    spans = p;
  }
  return Even(tokens, units, unit_tokens, spans);
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
