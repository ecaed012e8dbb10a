// The state slice of the warp-slice decode kernel (device code; the kernel
// is recurrent_warp_slice_kernel.cuh): its compile-time shape, its place in
// the warp's shared-memory double buffer, the cp.async copy in, the unpack
// into registers, and the stores out (fp32 / bf16 rows; int8 / fp8 codes
// and their column-pair scales).
//
// One warp owns one slice: all K rows x kCols = 16 adjacent V columns of one
// (sequence, value head). Lane l holds rows [l * kRows, (l + 1) * kRows)
// (kRows = K / 32: 4 at K = 128, 2 at K = 64; the same rows whose q / k
// elements it loads, recurrent_tokens.cuh NormalizeQk) x 16 columns, fp32,
// in registers: s[kRows][16].
//
// Shared memory, per warp and stage: the slice as kTileVecs 16-byte vectors
// (vector v = row * kVecsPerRow + piece; kVecsPerRow = 4 fp32, 2 bf16,
// 1 int8 / fp8), then for int8 / fp8 the slice's 8 fp32 scales (2 vectors).
// The copy is coalesced on the global side (copy i of lane l: vector
// 32 i + l, so a warp instruction covers whole 32-byte sectors of adjacent
// rows) and lands at slot Swizzle(v) = v ^ (owner lane & 7): the owner's
// reads (vectors owner * kVecsPerLane + j, a stride of kVecsPerLane
// vectors across the lanes) then fall in 8 distinct 16-byte bank groups per
// quarter warp, conflict-free. Lanes read vectors other lanes copied, so
// cp.async.wait_group is followed by __syncwarp (which orders shared memory
// within the warp); no block barrier anywhere.
#ifndef GDN_KERNELS_CUDA_RECURRENT_WARP_SLICE_TILE_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_WARP_SLICE_TILE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/cp_async.cuh"
#include "kernels/cuda/common/vector_access.cuh"
#include "kernels/cuda/recurrent_item.cuh"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/cuda/recurrent_quant.cuh"
#include "kernels/cuda/recurrent_shape.cuh"
#include "kernels/gdn_types.h"
#include "kernels/state_quant.h"

namespace gdn::cuda {

template <int kK_, int kV_, typename InT_, typename StateT_, int kMinBlocks_>
struct WarpSliceShape {
  using InT = InT_;
  using StateT = StateT_;
  static constexpr int kK = kK_;
  static constexpr int kV = kV_;
  static constexpr int kCols = 16;  // V columns of a slice
  // RecurrentItem's decode of a unit index (recurrent_item.cuh LoadItemAt):
  // unit = (seq * Hv + head) * kTilesPerHead + slice.
  static constexpr int kVTile = kCols;
  static constexpr int kTilesPerHead = kV / kCols;
  static constexpr int kRows = kK / 32;  // rows per lane
  static constexpr bool kQuant = kQuantState<StateT>;
  static constexpr int kVecsPerRow = kCols * static_cast<int>(sizeof(StateT)) / 16;
  static constexpr int kElemsPerVec = 16 / static_cast<int>(sizeof(StateT));
  static constexpr int kTileVecs = kK * kVecsPerRow;
  static constexpr int kVecsPerLane = kTileVecs / 32;  // = kRows * kVecsPerRow
  static constexpr int kScales = kQuant ? kCols / kStateScaleCols : 0;  // 8 column pairs
  static constexpr int kScaleVecs = kScales * 4 / 16;
  static constexpr int kStageVecs = kTileVecs + kScaleVecs;
  static constexpr int kWarps = 4;  // per block; warps are independent
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocks = kMinBlocks_;
  // Dynamic shared memory of a block: two stages per warp.
  static constexpr size_t kSmemBytes = size_t{kWarps} * 2 * kStageVecs * 16;

  static_assert(kK % 32 == 0 && kV % kCols == 0, "whole lanes of rows, whole slices");
  static_assert(kVecsPerRow >= 1 && kTileVecs % 32 == 0 && kTileVecs % 8 == 0,
                "whole vectors per row, per lane and per swizzle group");
  static_assert(kScaleVecs <= 32, "one scale vector per lane");
};

// One halving step of a reduce-scatter: of v[0, 2n) the lane with `offset`
// set keeps (and gets the partner's share of) the upper half, the other the
// lower, into v[0, n). N a template argument so every index is a constant.
template <int kN, typename T, typename Op>
__device__ __forceinline__ void HalveAcrossLanes(T* v, int offset, Op op) {
  const bool upper = (threadIdx.x & offset) != 0;
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    const T send = upper ? v[i] : v[i + kN];
    const T keep = upper ? v[i + kN] : v[i];
    v[i] = op(keep, __shfl_xor_sync(0xffffffffu, send, offset));
  }
}

// Shared-memory slot of slice vector v (see the file comment).
template <typename Shape>
__device__ __forceinline__ int SliceSlot(int v) {
  return v ^ ((v / Shape::kVecsPerLane) & 7);
}

// Element offset of (row, col0) of head `head` in a page.
template <typename Shape>
__device__ __forceinline__ int64_t SliceElement(int head, int row, int col0) {
  return ((int64_t)head * Shape::kK + row) * Shape::kV + col0;
}

// Issues the cp.async copies of `it`'s initial slice (and int8 / fp8
// scales) into `stage` (nothing for a zero or unusable initial page); the
// caller commits.
template <typename Shape>
__device__ __forceinline__ void PrefetchSlice(const RecurrentParams& p, const RecurrentItem& it,
                                              uint4* stage) {
  if (it.initial_page < 0 || !it.pages_ok) return;
  const int lane = threadIdx.x % 32;
  const char* page = p.pool_base + (int64_t)it.initial_page * p.page_bytes;
  const char* base = page + SliceElement<Shape>(it.head, 0, it.col0) * sizeof(typename Shape::StateT);
#pragma unroll
  for (int i = 0; i < Shape::kVecsPerLane; ++i) {
    const int v = 32 * i + lane;
    const int row = v / Shape::kVecsPerRow, piece = v % Shape::kVecsPerRow;
    CopyAsync16(stage + SliceSlot<Shape>(v),
                base + ((int64_t)row * Shape::kV * sizeof(typename Shape::StateT) + 16 * piece));
  }
  if constexpr (Shape::kQuant) {
    if (lane < Shape::kScaleVecs) {
      CopyAsync16(stage + Shape::kTileVecs + lane,
                  page + ScaleOffset(p.num_v_heads, Shape::kK, Shape::kV, it.head, it.col0) +
                      16 * lane);
    }
  }
}

// PDL prologue: L2 prefetch of this lane's rows (each row's 16-64 bytes lie
// in one 128-byte line) and the scales of `it`'s initial slice.
template <typename Shape>
__device__ __forceinline__ void PrefetchSliceL2(const RecurrentParams& p,
                                                const RecurrentItem& it) {
  if (it.initial_page < 0 || !it.pages_ok) return;
  const int lane = threadIdx.x % 32;
  const char* page = p.pool_base + (int64_t)it.initial_page * p.page_bytes;
#pragma unroll
  for (int r = 0; r < Shape::kRows; ++r) {
    PrefetchL2(page + SliceElement<Shape>(it.head, lane * Shape::kRows + r, it.col0) *
                          sizeof(typename Shape::StateT));
  }
  if constexpr (Shape::kQuant) {
    if (lane == 0) {
      PrefetchL2(page + ScaleOffset(p.num_v_heads, Shape::kK, Shape::kV, it.head, it.col0));
    }
  }
}

// This lane's rows of the landed slice in `stage` -> s (fp32 / bf16:
// values; int8 / fp8: the codes' values before the scale). The caller has
// waited for its copies and run __syncwarp.
template <typename Shape>
__device__ __forceinline__ void UnpackSlice(const uint4* stage,
                                            float (&s)[Shape::kRows][Shape::kCols]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < Shape::kRows; ++r) {
#pragma unroll
    for (int piece = 0; piece < Shape::kVecsPerRow; ++piece) {
      const int v = (lane * Shape::kRows + r) * Shape::kVecsPerRow + piece;
      float* out = &s[r][piece * Shape::kElemsPerVec];
      UnpackState<typename Shape::StateT, Shape::kElemsPerVec>(
          stage[SliceSlot<Shape>(v)],
          *reinterpret_cast<float(*)[Shape::kElemsPerVec]>(out));
    }
  }
}

// fp32 / bf16: the slice in registers into page `page`, through `stage`
// (free while the slice is in registers) so that the global stores are
// coalesced like the copy in: each lane writes its own vectors to their
// slots, then stores vectors 32 i + lane.
template <typename Shape>
__device__ __forceinline__ void StoreSlice(const RecurrentParams& p, const RecurrentItem& it,
                                           int page, uint4* stage,
                                           const float (&s)[Shape::kRows][Shape::kCols]) {
  using StateT = typename Shape::StateT;
  static_assert(!Shape::kQuant, "int8 / fp8 slices: StoreQuantSlice");
  const int lane = threadIdx.x % 32;
  __syncwarp();  // a previous store's reads of `stage` are done
#pragma unroll
  for (int r = 0; r < Shape::kRows; ++r) {
#pragma unroll
    for (int piece = 0; piece < Shape::kVecsPerRow; ++piece) {
      const int v = (lane * Shape::kRows + r) * Shape::kVecsPerRow + piece;
      const float* in = &s[r][piece * Shape::kElemsPerVec];
      stage[SliceSlot<Shape>(v)] = PackState<StateT, Shape::kElemsPerVec>(
          *reinterpret_cast<const float(*)[Shape::kElemsPerVec]>(in));
    }
  }
  __syncwarp();
  char* base = p.pool_base + (int64_t)page * p.page_bytes +
               SliceElement<Shape>(it.head, 0, it.col0) * sizeof(StateT);
#pragma unroll
  for (int i = 0; i < Shape::kVecsPerLane; ++i) {
    const int v = 32 * i + lane;
    const int row = v / Shape::kVecsPerRow, piece = v % Shape::kVecsPerRow;
    StoreStreaming<uint4>(base + ((int64_t)row * Shape::kV * sizeof(StateT) + 16 * piece),
                          stage[SliceSlot<Shape>(v)]);
  }
}

// int8 / fp8: the slice in registers (fp32 values) into page `page` as
// codes and the 8 column-pair scales, with state_quant.h's arithmetic as
// recurrent_quant.cuh StoreQuantTileAs applies it (same amax on the bits,
// GroupScaleFor, fast nearest encoders or the software encoders for
// stochastic rounding and NaN groups, same element indices for the random
// bits), so the bytes equal that store's for the same values. A warp holds
// all K rows of its columns, so each pair's max |x| is an in-warp max:
//   per lane, max over its rows of each pair (8 values); a reduce-scatter
//   over lane bits 4, 3, 2 (4 + 2 + 1 shuffles) leaves pair (lane >> 2) & 7
//   on lane, then a max over lane bits 1, 0 (2 shuffles): lanes 4 g .. 4 g
//   + 3 hold pair g's amax; each lane computes its pair's scale (one
//   division per lane) and the 8 inverses are broadcast back (8 shuffles).
template <typename Shape, bool kStochastic>
__device__ __forceinline__ void StoreQuantSliceAs(const RecurrentParams& p,
                                                  const RecurrentItem& it, char* page_base,
                                                  uint32_t salt,
                                                  const float (&s)[Shape::kRows][Shape::kCols]) {
  using StateT = typename Shape::StateT;
  constexpr int kPairs = Shape::kScales;
  static_assert(kPairs == 8 && kStateScaleCols == 2, "8 column pairs per slice");
  const int lane = threadIdx.x % 32;
  uint32_t m[kPairs];
#pragma unroll
  for (int g = 0; g < kPairs; ++g) {
    float f = 0.0f;
#pragma unroll
    for (int r = 0; r < Shape::kRows; ++r)
#pragma unroll
      for (int c = 0; c < kStateScaleCols; ++c) f = MaxAbsNaN(f, s[r][g * kStateScaleCols + c]);
    m[g] = __float_as_uint(f);
  }
  const auto max_op = [](uint32_t a, uint32_t b) { return max(a, b); };
  HalveAcrossLanes<4>(m, 16, max_op);
  HalveAcrossLanes<2>(m, 8, max_op);
  HalveAcrossLanes<1>(m, 4, max_op);
  uint32_t amax = m[0];
  amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  const quant::GroupScale gs = quant::GroupScaleFor(amax, kQuantMax<StateT>);
  const bool nan_slice = __any_sync(0xffffffffu, amax >= 0x7f800000u);
  float inv[kPairs];
#pragma unroll
  for (int g = 0; g < kPairs; ++g) inv[g] = __shfl_sync(0xffffffffu, gs.inv, 4 * g);
  const float my_scale = __shfl_sync(0xffffffffu, gs.scale, 4 * (lane % kPairs));
  if (lane < kPairs) {
    reinterpret_cast<float*>(page_base + ScaleOffset(p.num_v_heads, Shape::kK, Shape::kV,
                                                     it.head, it.col0))[lane] = my_scale;
  }
  const int64_t at0 = SliceElement<Shape>(it.head, lane * Shape::kRows, it.col0);
  char* dst = page_base + at0;
  if (!kStochastic && !nan_slice) {  // one branch per slice, not per row
#pragma unroll
    for (int r = 0; r < Shape::kRows; ++r) {
      uint32_t words[Shape::kCols / 4];
#pragma unroll
      for (int w = 0; w < Shape::kCols / 4; ++w) {
        float y[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          // Rounded on its own, as in state_quant.h (never fused with the
          // int8 encoder's add).
          y[i] = __fmul_rn(s[r][4 * w + i], inv[(4 * w + i) / kStateScaleCols]);
        }
        words[w] = EncodeNearestWord<StateT>(y);
      }
      StoreCodeRow<uint4>(dst + r * Shape::kV, words);
    }
  } else {
#pragma unroll
    for (int r = 0; r < Shape::kRows; ++r) {
      const uint32_t index = static_cast<uint32_t>(at0) + r * Shape::kV;
      uint32_t words[Shape::kCols / 4];
#pragma unroll
      for (int w = 0; w < Shape::kCols / 4; ++w) {
        words[w] = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int c = 4 * w + i;
          const uint32_t bits = kStochastic ? quant::ElementBits(salt, index + c) : 0u;
          words[w] |= EncodeSoftware<StateT>(s[r][c], inv[c / kStateScaleCols], kStochastic,
                                             bits)
                      << (8 * i);
        }
      }
      StoreCodeRow<uint4>(dst + r * Shape::kV, words);
    }
  }
}

// The int8 / fp8 store with the rounding of p (a warp-uniform branch);
// last_token: the token whose gates salt stochastic rounding
// (recurrent_quant.cuh StoreQuantTile).
template <typename Shape>
__device__ __forceinline__ void StoreQuantSlice(const RecurrentParams& p, const RecurrentItem& it,
                                                int page, int64_t last_token,
                                                const float (&s)[Shape::kRows][Shape::kCols]) {
  char* base = p.pool_base + (int64_t)page * p.page_bytes;
  if (p.stochastic_rounding) {
    const int64_t gi = last_token * p.num_v_heads + it.head;
    const uint32_t salt = p.fused_gating ? quant::RoundingSalt(p.a[gi], p.b[gi])
                                         : quant::RoundingSalt(p.g[gi], p.beta[gi]);
    StoreQuantSliceAs<Shape, true>(p, it, base, salt, s);
  } else {
    StoreQuantSliceAs<Shape, false>(p, it, base, 0u, s);
  }
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_WARP_SLICE_TILE_CUH_
