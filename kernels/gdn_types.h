// The Gated DeltaNet operator's configuration: shapes, dtypes and options.
//
// This header is shared by every backend (cpu, cuda), the float64 oracle, the
// state cache and the server. It has no CUDA includes.
//
// The operator (per sequence, per value head h, token t; see shared/GDN.md):
//   S   = exp(g_t) * S                  decay, g_t <= 0 (log space)
//   u_t = beta_t * (v_t - S^T k_t)      delta-rule correction
//   S   = S + k_t u_t^T                 rank-1 write
//   o_t = S^T (scale * q_t)             read
// with S of shape [K, V], q/k from q/k head h / (Hv / Hqk) (grouped values).
#ifndef GDN_KERNELS_GDN_TYPES_H_
#define GDN_KERNELS_GDN_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gdn {

// Element type of q, k, v and o (activations on the wire and in the kernels).
enum class DType : int { kF32 = 0, kBF16 = 1, kF16 = 2 };

// Storage type of a recurrent state page. Arithmetic on the state is always
// fp32: a call loads the state once, keeps it in fp32 across all of its
// tokens, and rounds once when it stores it. So a decode step rounds once
// per step, and a prefill once per call. bf16 rounds to nearest even; the
// quantised types (one byte per element plus fp32 scales in the page, see
// StatePageLayout and kernels/state_quant.h) round as GdnOptions::
// state_rounding says.
enum class StateDType : int { kF32 = 0, kBF16 = 1, kInt8 = 2, kFP8 = 3 };

// int8 and fp8 (e4m3) pages: codes times per-group fp32 scales.
constexpr bool IsQuantizedState(StateDType dtype) {
  return dtype == StateDType::kInt8 || dtype == StateDType::kFP8;
}

// How a quantised state is rounded when it is stored (bf16 and fp32 pages
// ignore it). kStochastic rounds up with probability equal to the fraction
// of a quantisation step, from deterministic hash bits (state_quant.h), so
// the stored state is unbiased and a state that changes by less than half a
// step per token still moves; kNearest is round to nearest even. The default
// is the one the drift measurement picked: nearest, whose o error was 0.7x
// stochastic's at every step of 64k-step chains, both gatings, int8 and fp8,
// with no upward trend either way (bench/eval/state_drift.h, README "State
// dtypes").
enum class StateRounding : int { kNearest = 0, kStochastic = 1 };

// How the decay g and write strength beta reach the kernel.
enum class GatingMode : int {
  // g [T, Hv] (log space, <= 0) and beta [T, Hv] in (0, 1) are given.
  kDirect = 0,
  // The Qwen3-Next layer: raw a [T, Hv], b [T, Hv] and per-head A_log [Hv],
  // dt_bias [Hv]; the kernel computes
  //   g = -exp(A_log[h]) * softplus(a + dt_bias[h]),  beta = sigmoid(b),
  // with softplus(x) = x for x > 20.
  kFused = 1,
};

size_t DTypeSize(DType dtype);
size_t StateDTypeSize(StateDType dtype);
absl::string_view DTypeName(DType dtype);            // "fp32", "bf16", "fp16"
absl::string_view StateDTypeName(StateDType dtype);  // "fp32", "bf16", "int8", "fp8"
absl::string_view StateRoundingName(StateRounding r);  // "nearest", "stochastic"
absl::string_view GatingModeName(GatingMode mode);   // "direct", "fused"
bool ParseDType(absl::string_view name, DType* out);
bool ParseStateDType(absl::string_view name, StateDType* out);
bool ParseStateRounding(absl::string_view name, StateRounding* out);
bool ParseGatingMode(absl::string_view name, GatingMode* out);

// The shape of one GDN layer. The default is Qwen3-Next-80B at TP1.
struct LayerShape {
  int num_qk_heads = 16;  // Hqk
  int num_v_heads = 32;   // Hv, a multiple of Hqk (grouped value attention)
  int head_dim_k = 128;   // K: 64 or 128
  int head_dim_v = 128;   // V: 64 or 128

  int group_size() const { return num_v_heads / num_qk_heads; }
};

// Everything that selects a kernel instance. Fixed per server (per layer
// configuration), validated once with ValidateOptions.
struct GdnOptions {
  LayerShape shape;
  DType input_dtype = DType::kBF16;  // q, k, v and o
  StateDType state_dtype = StateDType::kF32;
  StateRounding state_rounding = StateRounding::kNearest;  // int8 / fp8 only
  GatingMode gating = GatingMode::kDirect;
  bool l2_norm_qk = true;  // q, k <- x / sqrt(sum(x^2) + 1e-6), in fp32
  float scale = 0.0f;      // 0 means K^-1/2

  float effective_scale() const;
};

// Tokens one sequence may bring to Decode (speculative verification needs
// several); longer sequences go through Prefill.
inline constexpr int kMaxDecodeTokens = 8;

// Epsilon of the in-kernel L2 norm.
inline constexpr float kL2NormEps = 1e-6f;

// The in-kernel L2 norm without overflow: sum(x^2) of a finite fp32 / bf16
// row overflows once max|x| reaches ~2^64 / sqrt(K) (>= 2^60 for K <= 256),
// and the norm would come out 0. Every backend computes the sum directly
// and, only when it is not finite, multiplies the row by this exact power of
// two and sums again: max|x| < 2^128 then gives a sum below 2^56 * K, the
// largest element stays >= 2^-40 (normal, squares normal), and eps, 2^-200
// below it, drops out: x / sqrt(sum x^2 + eps) = y / sqrt(sum y^2), y = x c.
// The common case costs one compare per row. Tiny rows (1e-30) need nothing:
// their squares underflow harmlessly far below eps.
inline constexpr float kL2NormRescale = 0x1p-100f;

// Returns InvalidArgument naming the first unsupported field, or OK.
absl::Status ValidateOptions(const GdnOptions& options);

// Columns of V that share one fp32 scale in an int8 / fp8 page: a scale
// covers kStateScaleCols adjacent columns of one head over all K rows.
//
// Why columns (per (head, V column) granularity, the same count as the
// issue's per (head, K row) when K = V): every kernel splits a head's state
// by V columns only, never by K rows. The CUDA decode block and the chunked
// prefill block each own a [K, V tile] tile, so a column's max|x| over K is
// a reduction inside one block (warp shuffles + one shared-memory
// exchange); a K row spans V tiles held by different blocks and would need
// a grid-wide reduction. The CPU backend splits heads by 16-column slabs,
// likewise. Why pairs: one fp32 scale per column costs 4 / K bytes per
// element, 3.88x the pages of fp32 at K = V = 128 (short of the 3.9x
// target); per pair it is 3.94x, and each thread of both CUDA kernels holds
// whole pairs (16 adjacent columns in decode, the (2 tig, 2 tig + 1) pair of
// an mma accumulator in prefill), so the pair costs no extra exchange. The
// drift of 1, 2 and wider groups is compared in the README (State dtypes).
inline constexpr int kStateScaleCols = 2;

// The bytes of one state page: one (session, layer) state.
//
// Layout: [Hv, K, V] elements of state_dtype, V fastest (the same as
// flash-linear-attention's final_state [N, H, K, V] for one sequence), then,
// for int8 / fp8, fp32 scales [Hv, V / kStateScaleCols] (scale j of head h
// covers columns [j * kStateScaleCols, (j + 1) * kStateScaleCols) of all K
// rows; value = code * scale). The scales start at state_bytes, a multiple
// of 4096. Pages are padded to a multiple of 256 bytes so that every page
// starts aligned for vector loads and bulk copies.
struct StatePageLayout {
  size_t state_bytes = 0;   // Hv * K * V * StateDTypeSize
  size_t scales_bytes = 0;  // Hv * V / kStateScaleCols * 4 for int8 / fp8, else 0
  size_t page_bytes = 0;    // state_bytes + scales_bytes, rounded up to 256

  static StatePageLayout For(const LayerShape& shape, StateDType dtype);
};

std::string DescribeOptions(const GdnOptions& options);

}  // namespace gdn

#endif  // GDN_KERNELS_GDN_TYPES_H_
