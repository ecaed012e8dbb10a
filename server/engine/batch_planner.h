// Which work goes into the next batch. Pure: sees token counts and slots (the
// engine's integer ids of (session, layer) states: slot_table.h), never
// tensors or pages; safe from any thread.
//
// Two kinds of batch, on lanes of their own (engine.h):
//   decode:  every ready item of <= kMaxDecodeTokens tokens, whole, up to
//            max_batch_tokens tokens;
//   prefill: the longer items, in admission order, split into chunks under
//            max_batch_tokens tokens in all, so that a long prefill spreads
//            over batches.
// Never two chunks of the same slot in one plan: a state is read and written
// by one sequence of one kernel call at a time.
#ifndef GDN_SERVER_ENGINE_BATCH_PLANNER_H_
#define GDN_SERVER_ENGINE_BATCH_PLANNER_H_

#include <cstdint>
#include <vector>

#include "kernels/gdn_types.h"

namespace gdn {

// One sequence of an admitted call, as the planner sees it.
struct PlanItem {
  int32_t slot = 0;          // its (session, layer) state
  int32_t total_tokens = 0;  // num_tokens of the sequence
  int32_t done_tokens = 0;   // tokens already in earlier batches

  bool is_decode() const { return total_tokens <= kMaxDecodeTokens; }
  int32_t remaining() const { return total_tokens - done_tokens; }
};

// Tokens [offset, offset + tokens) of items[item].
struct PlannedChunk {
  size_t item = 0;
  int32_t offset = 0;
  int32_t tokens = 0;
};

struct BatchPlan {
  std::vector<PlannedChunk> decode;
  std::vector<PlannedChunk> prefill;
  int64_t decode_tokens = 0;
  int64_t prefill_tokens = 0;

  bool empty() const { return decode.empty() && prefill.empty(); }
};

struct PlannerLimits {
  int64_t max_batch_tokens = 8192;  // per phase and iteration
  // A prefill split mid-sequence is cut at a multiple of this (the kernels'
  // chunk length), so carried chunks stay aligned.
  int32_t chunk_align = 64;
};

// `items` in admission order; every item has remaining() >= 1.
BatchPlan PlanBatch(const std::vector<PlanItem>& items,
                    const PlannerLimits& limits);

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_BATCH_PLANNER_H_
