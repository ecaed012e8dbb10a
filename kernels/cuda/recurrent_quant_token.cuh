// One token of the recurrent kernel over an int8 / fp8 page's state tile
// (device code; RunItemTokens calls it for the one-byte state types, the
// fp32 / bf16 tiles keep their own step in recurrent_kernel.cuh).
//
// The tile s (this thread's kRowsPerThread rows x kCols = 8 columns, the
// layout of recurrent_kernel.cuh) holds the decayed state D = exp(g) S of
// the token on entry when `decayed` (an item's first token: the kernels
// multiply the codes by scale * exp(g_0) once, recurrent_quant.cuh
// ApplyScales), else S. Per token:
//   D = exp(g) S                             (skipped when decayed)
//   partial D^T k, D^T q over my rows         2 FFMA per element
//   reduce-scatter over the warp's row groups: after log2(32 / kThreadsPerRow)
//     exchanges each lane holds 16 / (32 / kThreadsPerRow) sums (one kind,
//     adjacent columns), written to partial[0][warp][kind][column];
//   barrier; thread c < kVTile sums column c over the warps, computes
//     u_c = beta (v_c - (D^T k)_c) and o_c = (D^T q)_c + (k . q) u_c,
//     writes o_c and u_c (smem.u);
//   barrier; S' = D + k u^T                    1 FFMA per element.
// q and k are staged raw (recurrent_tokens.cuh StageTokens), with q . q + eps
// and k . k + eps: D^T k, D^T q and k . q above are of the raw rows, and
// thread c applies the factors fq = scale / sqrt(q . q + eps) and fk =
// 1 / sqrt(k . k + eps) (rsqrtf: 2 ulp) to its two sums, to k . q, and to u
// before writing it (smem.u holds fk u, for the raw k of the update). Against
// normalised rows this rounds differently by a few ulp (the tests' bars are
// the int8 / fp8 rounding, orders of magnitude above), and moves the staging
// warp's sqrt / division chains out of the barrier-bound staging.
// Against the fp32 step (every thread reducing all of its 16 sums over every
// row group and warp) this issues about half the instructions per token
// and no multiply of k u^T, for a second barrier.
//
// Buffers: partial[0] is written after the previous token's second barrier
// and read before this token's; smem.u is written after the first barrier
// and read before the next token's first: single buffers suffice.
#ifndef GDN_KERNELS_CUDA_RECURRENT_QUANT_TOKEN_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_QUANT_TOKEN_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/vector_access.cuh"
#include "kernels/cuda/recurrent_params.h"

namespace gdn::cuda {

// Token t of the staged chunk (token index `token` of the batch) of value
// head `head`, columns [col0, col0 + kVTile); pages_ok false writes NaN
// outputs (as the fp32 step).
template <typename Shape, typename Smem>
__device__ __forceinline__ void QuantTokenStep(
    const RecurrentParams& p, Smem& smem, int head, int col0, bool pages_ok, int t,
    int64_t token, bool decayed, float (&s)[Shape::kRowsPerThread][Shape::kCols]) {
  using InT = typename Shape::InT;
  constexpr int kCols = Shape::kCols;
  constexpr int kRows = Shape::kRowsPerThread;
  constexpr int kRowGroups = Shape::kRowGroups;
  constexpr int kThreadsPerRow = Shape::kThreadsPerRow;
  constexpr int kLanesPerColumn = 32 / kThreadsPerRow;  // row groups of a warp
  constexpr int kKept = 2 * kCols / kLanesPerColumn;  // sums a lane keeps
  static_assert(kThreadsPerRow <= 16, "at least two row groups per warp (the kind exchange)");
  static_assert(kKept >= 1 && 2 * kCols % kLanesPerColumn == 0, "sums split over the lanes");
  static_assert(Shape::kThreads >= Shape::kVTile, "one thread per column for u and o");
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int col_group = threadIdx.x % kThreadsPerRow;
  const int row_group = threadIdx.x / kThreadsPerRow;

  if (!decayed) {
    const float decay = smem.decay[t];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < kCols; ++c) s[r][c] *= decay;
  }
  // Lanes with the kThreadsPerRow bit set accumulate D^T q in `mine` and
  // D^T k in `theirs`, the others the reverse: the first exchange (with the
  // partner across that bit) swaps `theirs` with no selects.
  const bool q_lane = (lane & kThreadsPerRow) != 0;
  const float* mine_vec = q_lane ? smem.q[t] : smem.k[t];
  const float* theirs_vec = q_lane ? smem.k[t] : smem.q[t];
  float mine[kCols], theirs[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) mine[c] = theirs[c] = 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float a = mine_vec[r * kRowGroups + row_group];
    const float b = theirs_vec[r * kRowGroups + row_group];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      mine[c] = fmaf(s[r][c], a, mine[c]);
      theirs[c] = fmaf(s[r][c], b, theirs[c]);
    }
  }
  float v[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    v[c] = mine[c] + __shfl_xor_sync(0xffffffffu, theirs[c], kThreadsPerRow);
  }
  // Halve the columns per exchange: the lane with the offset bit set keeps
  // the upper half. `first`: the lane's first kept column within its kCols.
  int first = 0;
#pragma unroll
  for (int offset = 2 * kThreadsPerRow, n = kCols / 2; offset < 32; offset *= 2, n /= 2) {
    const bool upper = (lane & offset) != 0;
#pragma unroll
    for (int i = 0; i < n; ++i) {
      const float send = upper ? v[i] : v[i + n];
      const float keep = upper ? v[i + n] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
    }
    if (upper) first += n;
  }
  float* partial = &smem.partial[0][warp][q_lane ? 1 : 0][col_group * kCols + first];
#pragma unroll
  for (int i = 0; i < kKept; ++i) partial[i] = v[i];
  __syncthreads();

  if (threadIdx.x < Shape::kVTile) {
    const int c = threadIdx.x;
    // The staged rows are raw (recurrent_tokens.cuh StageTokens): the
    // normalisation's factors scale the reduced sums, k . q and u instead.
    float q_factor = p.scale, k_factor = 1.0f;
    if (p.l2_norm_qk) {
      q_factor *= rsqrtf(smem.qq[t]);
      k_factor = rsqrtf(smem.kk[t]);
    }
    float sk = smem.partial[0][0][0][c], sq = smem.partial[0][0][1][c];
#pragma unroll
    for (int w = 1; w < Shape::kWarps; ++w) {
      sk += smem.partial[0][w][0][c];
      sq += smem.partial[0][w][1][c];
    }
    const float u = smem.beta[t] * (smem.v[t][c] - sk * k_factor);
    const float kq = smem.kq[t] * q_factor * k_factor;
    const float out = pages_ok ? fmaf(kq, u, sq * q_factor) : __int_as_float(0x7fc00000);
    // S' = D + (k_factor k) u^T = D + k (k_factor u)^T: one multiply per
    // column instead of one per row element.
    smem.u[c] = u * k_factor;
    static_cast<InT*>(p.o)[(token * p.num_v_heads + head) * Shape::kV + col0 + c] =
        FromFloat<InT>(out);
  }
  __syncthreads();

  float u[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) u[c] = smem.u[col_group * kCols + c];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float kr = smem.k[t][r * kRowGroups + row_group];
#pragma unroll
    for (int c = 0; c < kCols; ++c) s[r][c] = fmaf(kr, u[c], s[r][c]);
  }
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_QUANT_TOKEN_CUH_
