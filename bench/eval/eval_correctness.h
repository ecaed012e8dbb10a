// Correctness against the float64 oracle (seed 000, section 6.1): the
// configuration grid (lengths x batch x head dim x input dtype x state dtype
// x Decode / Prefill), long lengths on one head, and the extreme inputs
// (all-equal tokens, huge / tiny values, beta 0 and 1, strong decay, no decay
// for N steps, random gating masks) with NaN / Inf counts.
#ifndef GDN_BENCH_EVAL_EVAL_CORRECTNESS_H_
#define GDN_BENCH_EVAL_EVAL_CORRECTNESS_H_

#include "bench/eval/eval_context.h"
#include "bench/eval/json_value.h"
#include "kernels/oracle/gdn_oracle.h"

namespace gdn::eval {

// Pass / fail bars on the two error measures of GDN.md: max_abs_rel =
// max|d| / max|ref| and rel_l2 = ||d|| / ||ref||, for outputs and final states.
struct Bar {
  double max_abs_rel = 0;
  double rel_l2 = 0;
};
struct Thresholds {
  Bar output;
  Bar state;
};
// fp32 everywhere: seed 000's 1e-3. Any bf16 operand (inputs, or a state
// rounded once per call): 5e-3 (one bf16 rounding is up to 2^-8 = 3.9e-3 of
// an element; GDN.md expects 1e-3 .. 5e-3 with bf16 tensor-core operands).
// A bf16 state in a decode chain is rounded after every step (unit roundoff
// u = 2^-9). Each rounding's error then decays with the gates, so it lives
// for about M = 1 / (1 - exp(mean g)) steps (at most the chain's length;
// M ~ 20 for GDN.md's g = logsigmoid(randn) / 16). The bars follow from that
// model, fixed before any measurement: max_abs_rel <= u * M (every rounding
// aligned, the worst case) and rel_l2 <= u * sqrt(M) (independent roundings:
// about 1.7x their expected u * sqrt(M / 3)), never below the 5e-3 of one
// rounding. `memory_steps` is M (DecayMemorySteps); unused otherwise.
Thresholds ThresholdsFor(DType input, StateDType state, bool decode_chain, double memory_steps = 0);

// M of the model above for `inputs`: 1 / (1 - exp(mean g)) over every token
// and value head (fused gating evaluated as the oracle does), capped at the
// longest sequence (a rounding cannot outlive the chain).
double DecayMemorySteps(const oracle::Inputs& inputs);

// Appends its Markdown to ctx.markdown. JSON: {"thresholds", "grid",
// "single_head", "extreme", "all_pass", "counts"}.
Json RunCorrectness(EvalContext& ctx);

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_EVAL_CORRECTNESS_H_
