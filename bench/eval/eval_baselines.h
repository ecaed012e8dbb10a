// Baselines (seed 000, section 5.5). The float64 oracle is the plain
// recurrence but single-threaded double precision: its speed is no fair
// baseline, so it is not timed. What gdn-eval compares, through the Backend
// interface only: one Prefill call over L tokens ("chunked"/batched path)
// against L Decode calls of one token ("recurrent", the server's decode loop)
// on the same inputs, with both results checked against each other. Softmax
// attention (PyTorch SDPA) and flash-linear-attention on the GPU come from
// bench/eval/gpu_baselines.py (run by run_device.sh), not from this binary.
#ifndef GDN_BENCH_EVAL_EVAL_BASELINES_H_
#define GDN_BENCH_EVAL_EVAL_BASELINES_H_

#include "bench/eval/eval_context.h"
#include "bench/eval/json_value.h"

namespace gdn::eval {

// Appends Markdown. JSON: {"note", "chunked_vs_recurrent": [...]}.
Json RunBaselines(EvalContext& ctx);

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_EVAL_BASELINES_H_
