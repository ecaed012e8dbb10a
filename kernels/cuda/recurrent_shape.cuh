// The compile-time block shape of the recurrent GDN kernels (device code):
// RecurrentShape (sizes and thread layout), the block's shared memory for
// staged tokens and the cross-warp reduction, and one state row vector to
// and from floats.
//
// Thread layout of a block of kThreads threads over a [kK, kVTile] tile:
//   each thread owns kCols = 16 / sizeof(StateT) adjacent columns (one
//   16-byte vector per row; int8 / fp8 codes: 8 columns, one 8-byte vector)
//   and kRowsPerThread rows r * kRowGroups + rg;
//   kThreadsPerRow = kVTile / kCols consecutive lanes cover one tile row, so
//   a warp load instruction reads 32 / kThreadsPerRow whole row segments.
// The reduction over K: shuffles across the row groups of a warp, then one
// shared-memory exchange across warps (double-buffered: one __syncthreads
// per token).
#ifndef GDN_KERNELS_CUDA_RECURRENT_SHAPE_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_SHAPE_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common/vector_access.cuh"
#include "kernels/cuda/recurrent_quant.cuh"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda {

// Tokens staged in shared memory at a time (= the decode bound).
inline constexpr int kTokensPerChunk = kMaxDecodeTokens;
static_assert(kCheckpointTokens % kTokensPerChunk == 0, "checkpoints end token chunks");

template <int kK_, int kV_, int kVTile_, int kThreads_, typename InT_, typename StateT_,
          int kMinBlocks_ = 1>
struct RecurrentShape {
  using InT = InT_;
  using StateT = StateT_;
  static constexpr int kK = kK_;
  static constexpr int kV = kV_;
  static constexpr int kVTile = kVTile_;
  static constexpr int kThreads = kThreads_;
  static constexpr int kMinBlocks = kMinBlocks_;  // __launch_bounds__ residency hint
  static constexpr int kWarps = kThreads / 32;
  // Columns per thread: one 16-byte vector per row; int8 / fp8 codes one
  // 8-byte vector (recurrent_quant.cuh says why).
  static constexpr int kCols = kQuantState<StateT> ? 8 : 16 / static_cast<int>(sizeof(StateT));
  using RowBits = std::conditional_t<kCols * sizeof(StateT) == 16, uint4, uint2>;
  static constexpr int kThreadsPerRow = kVTile / kCols;
  static constexpr int kRowGroups = kThreads / kThreadsPerRow;
  static constexpr int kRowsPerThread = kK / kRowGroups;
  static constexpr int kTilesPerHead = kV / kVTile;
  static constexpr int kQkPerLane = kK / 32;  // q/k elements per lane (staging)

  static_assert(kThreads % 32 == 0, "whole warps");
  static_assert(kV % kVTile == 0, "V tiles cover V");
  static_assert(kVTile % kCols == 0, "whole vectors per row");
  static_assert(kCols * sizeof(StateT) == sizeof(RowBits), "a row vector is RowBits");
  static_assert(kThreadsPerRow >= 1 && 32 % kThreadsPerRow == 0,
                "a row segment is covered by lanes of one warp");
  static_assert(kK % kRowGroups == 0 && kRowsPerThread >= 1, "rows split evenly");
  static_assert(kK % 32 == 0, "q/k staged by one warp per token");
};

// Shared memory of one block: kTokensPerChunk tokens of staged inputs plus
// the double-buffered cross-warp reduction. q, k and kq as StageTokens
// writes them: fp32 / bf16 states normalised, int8 / fp8 states raw with
// the rsqrt arguments qq and kk.
template <typename Shape>
struct RecurrentSmem {
  static constexpr bool kQuant = kQuantState<typename Shape::StateT>;
  float q[kTokensPerChunk][Shape::kK];  // normalised, times scale (int8 / fp8: raw)
  float k[kTokensPerChunk][Shape::kK];  // normalised (int8 / fp8: raw)
  float v[kTokensPerChunk][Shape::kVTile];
  float decay[kTokensPerChunk];  // exp(g)
  float beta[kTokensPerChunk];
  float kq[kTokensPerChunk];  // k . (scale q) (int8 / fp8: raw k . q)
  // [buffer][warp][0: D^T k, 1: D^T q][column]
  alignas(16) float partial[2][Shape::kWarps][2][Shape::kVTile];
  // int8 / fp8 stores (recurrent_quant.cuh): each warp's max |x| (AbsBits)
  // per scale group of the tile, [0] for the final store and [1] for the
  // prefix-state stores (StoreTile); one element for the other dtypes.
  uint32_t amax[kQuant ? 2 : 1][kQuant ? Shape::kWarps : 1]
               [kQuant ? Shape::kVTile / kStateScaleCols : 1];
  float u[kQuant ? Shape::kVTile : 1];  // int8 / fp8 token step: u per column
  // int8 / fp8: q . q + eps and k . k + eps of the raw rows (l2_norm_qk);
  // one element for the other dtypes.
  float qq[kQuant ? kTokensPerChunk : 1];
  float kk[kQuant ? kTokensPerChunk : 1];
};

// One row vector -> floats (int8 / fp8: the codes' values before the scale).
template <typename StateT, int N, typename RowBits>
__device__ __forceinline__ void UnpackState(const RowBits& raw, float (&out)[N]) {
  static_assert(N * sizeof(StateT) == sizeof(RowBits), "one vector per row");
  if constexpr (kQuantState<StateT>) {
    const uint32_t* words = reinterpret_cast<const uint32_t*>(&raw);
#pragma unroll
    for (int w = 0; w < N / 4; ++w) DecodeCodeWord<StateT>(words[w], out + 4 * w);
  } else {
    const Vec<StateT, N>& vec = *reinterpret_cast<const Vec<StateT, N>*>(&raw);
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = ToFloat(vec.e[i]);
  }
}

template <typename StateT, int N>
__device__ __forceinline__ uint4 PackState(const float (&in)[N]) {
  static_assert(N * sizeof(StateT) == 16, "one 16-byte vector per row");
  uint4 raw;
  Vec<StateT, N>& vec = *reinterpret_cast<Vec<StateT, N>*>(&raw);
#pragma unroll
  for (int i = 0; i < N; ++i) vec.e[i] = FromFloat<StateT>(in[i]);
  return raw;
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_SHAPE_CUH_
