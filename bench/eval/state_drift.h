// The drift study of compressed states (issue 19): one long decode chain per
// storage variant, each step's state stored and loaded the way a page of that
// variant would (kernels/state_page_codec.h), against the float64 recurrence
// on the same inputs. Every variant runs in lockstep with its own float64
// oracle, so nothing of the 64k steps is kept but the recorded errors.
//
// The fp32 step is the CUDA decode kernel's arithmetic (recurrent_kernel.cuh:
// u = beta (v - e S^T k), o = e S^T q + (k . q) u, S = e S + k u^T, one
// rounding of the state per step). Inputs are drawn per step from a seed
// (q, k, v ~ randn rounded to bf16, as on the wire; q and k L2-normalised):
//   mild:  g = logsigmoid(randn) / 16, beta = sigmoid(randn);
//   qwen:  Qwen3-Next's gating, g = -exp(A_log) softplus(a + dt_bias) with
//          A = exp(A_log) ~ U(0, 16) per head, dt_bias = 1, a ~ N(0, 1), and
//          beta = sigmoid(b), b ~ N(0, 1).
// Variants: fp32, bf16, int8 / fp8 with nearest or stochastic rounding and
// a scale per `scale_cols` columns, and one error-compensation scheme, a
// low-precision residual: the int8 / fp8 page plus the rounding error of
// every element stored again in int4 (codes -7..7, one more fp32 scale per
// group), read back as code * scale + residual: 1.5 bytes per element.
#ifndef GDN_BENCH_EVAL_STATE_DRIFT_H_
#define GDN_BENCH_EVAL_STATE_DRIFT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/gdn_types.h"

namespace gdn::eval {

enum class DriftGating { kMild, kQwen };
const char* DriftGatingName(DriftGating gating);

struct DriftVariant {
  std::string name;  // e.g. "int8-stochastic", "fp8-nearest-c1", "int8+r4"
  StateDType dtype = StateDType::kF32;
  StateRounding rounding = StateRounding::kNearest;
  int scale_cols = kStateScaleCols;
  bool residual = false;  // + an int4 residual (error compensation)
};

// The variants of the study: fp32, bf16; per int8 / fp8: nearest and
// stochastic at the page's kStateScaleCols, stochastic at 1 and 32 columns
// per scale, and the residual scheme (with stochastic rounding).
std::vector<DriftVariant> StandardDriftVariants();

// "fp32", "int8-stochastic", "int8-stochastic-c32", "fp8+r4", ... -> variant.
absl::StatusOr<DriftVariant> ParseDriftVariant(const std::string& name);

struct DriftConfig {
  int heads = 2;   // Hqk = Hv
  int dim = 128;   // K = V
  int steps = 65536;
  uint64_t seed = 1;
  DriftGating gating = DriftGating::kMild;
};

// One recorded step: errors of that step's o (all heads) against the
// oracle, their mean over the steps since the previous record (what the
// plots show: one step's error is noisy), and the state's error.
struct DriftPoint {
  int step = 0;  // 1-based
  double o_rel_l2 = 0, o_max_abs_rel = 0;
  double o_rel_l2_window = 0;  // mean of o_rel_l2 over (previous record, step]
  double state_rel_l2 = 0;
  int64_t nonfinite = 0;  // NaN / Inf in o or the state so far
};

// Steps recorded: 24 per octave (log spaced) plus 1, 64, 1024, 8192, 65536.
std::vector<int> DriftRecordSteps(int steps);

// Runs one variant's chain with its oracle.
std::vector<DriftPoint> RunDriftChain(const DriftConfig& config, const DriftVariant& variant);

// The decay memory of the config's gating: 1 / (1 - exp(mean g)) steps,
// over the heads (mean of their memories) and the longest head's.
struct DecayMemory {
  double mean_steps = 0, longest_steps = 0;
};
DecayMemory DriftDecayMemory(const DriftConfig& config);

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_STATE_DRIFT_H_
