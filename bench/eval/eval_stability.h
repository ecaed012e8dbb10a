// Stability (seed 000, section 6.4): repeated runs at >= 70% of the longest
// prefill that fit (memory back to baseline after each, no drift in time or
// outputs), and long decode chains with the error against the oracle read at
// checkpoints (steps 1, 64, 1k, 8k, 64k on the GPU grid; fewer on cpu), for an
// fp32 and a bf16 state.
#ifndef GDN_BENCH_EVAL_EVAL_STABILITY_H_
#define GDN_BENCH_EVAL_EVAL_STABILITY_H_

#include "bench/eval/eval_context.h"
#include "bench/eval/eval_performance.h"
#include "bench/eval/json_value.h"

namespace gdn::eval {

// `largest`: from RunPerformance (batch 0: none ran; the grid's largest
// prefill config is then used). Appends Markdown. JSON: {"repeated",
// "decode_chains", "all_pass"}.
Json RunStability(EvalContext& ctx, const LargestPrefill& largest);

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_EVAL_STABILITY_H_
