#include "server/engine/batch_planner.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"

namespace gdn {

BatchPlan PlanBatch(const std::vector<PlanItem>& items,
                    const PlannerLimits& limits) {
  BatchPlan plan;
  absl::flat_hash_set<int32_t> used;
  used.reserve(items.size());  // no rehash while a 256-sequence call is planned
  const int64_t budget = std::max<int64_t>(limits.max_batch_tokens, 1);

  // Decode: whole items, first.
  for (size_t i = 0; i < items.size(); ++i) {
    const PlanItem& item = items[i];
    if (!item.is_decode() || item.remaining() < 1) continue;
    if (plan.decode_tokens + item.remaining() > budget) break;
    if (!used.insert(item.slot).second) continue;
    plan.decode.push_back({i, item.done_tokens, item.remaining()});
    plan.decode_tokens += item.remaining();
  }

  // Prefill: chunks under the token budget, in admission order.
  const int64_t align =
      std::max<int64_t>(1, std::min<int64_t>(limits.chunk_align, budget));
  for (size_t i = 0; i < items.size(); ++i) {
    const PlanItem& item = items[i];
    if (item.is_decode() || item.remaining() < 1) continue;
    const int64_t left = budget - plan.prefill_tokens;
    if (left <= 0) break;
    int64_t tokens = std::min<int64_t>(item.remaining(), left);
    if (tokens < item.remaining()) {
      tokens -= tokens % align;  // split at an aligned point
      if (tokens == 0) break;    // too little room left; next iteration
    }
    if (used.contains(item.slot)) continue;
    used.insert(item.slot);
    plan.prefill.push_back(
        {i, item.done_tokens, static_cast<int32_t>(tokens)});
    plan.prefill_tokens += tokens;
  }
  return plan;
}

}  // namespace gdn
