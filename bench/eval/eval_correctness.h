// Correctness against the float64 oracle (seed 000, section 6.1): the
// configuration grid (lengths x batch x head dim x input dtype x state dtype
// x Decode / Prefill), long lengths on one head, and the extreme inputs
// (all-equal tokens, huge / tiny values, beta 0 and 1, strong decay, no decay
// for N steps, random gating masks) with NaN / Inf counts.
#ifndef GDN_BENCH_EVAL_EVAL_CORRECTNESS_H_
#define GDN_BENCH_EVAL_EVAL_CORRECTNESS_H_

#include "bench/eval/eval_context.h"
#include "bench/eval/json_value.h"

namespace gdn::eval {

// Pass / fail bars on both error measures (max|d| / max|ref| and
// ||d|| / ||ref||), for outputs and final states.
struct Thresholds {
  double output = 0;
  double state = 0;
};
// fp32 everywhere: seed 000's 1e-3. Any bf16 operand (inputs, or a state
// rounded once per call): 5e-3 (one bf16 rounding is up to 2^-8 = 3.9e-3 of
// an element; GDN.md expects 1e-3 .. 5e-3 with bf16 tensor-core operands).
// A bf16 state in a decode chain is rounded after every step, and those
// roundings accumulate over the decay's memory (a few dozen steps at
// g ~ -0.05): 2e-2.
Thresholds ThresholdsFor(DType input, StateDType state, bool decode_chain);

// Appends its Markdown to ctx.markdown. JSON: {"thresholds", "grid",
// "single_head", "extreme", "all_pass", "counts"}.
Json RunCorrectness(EvalContext& ctx);

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_EVAL_CORRECTNESS_H_
