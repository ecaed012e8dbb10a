// The persistent recurrent kernel (device code; launcher in
// recurrent_launch.cuh):
// a grid of (SMs x resident blocks) walks the (sequence, head, V tile) items
// with a stride, and while one item computes, the next item's state tile is
// already streaming into shared memory with cp.async (two buffers).
//
// Why: in the one-block-per-item kernel the state bytes in flight live in
// registers only during a block's load phase, so the number of resident
// blocks (registers: the fp32 tile for the token loop) caps the bandwidth;
// bf16 pages carry half the bytes per register and suffer most. Here the
// bytes in flight live in shared memory and are always in flight.
//
// Each thread copies exactly the 16-byte rows it later owns, to slots
// [stage][row][thread] (conflict-free), so cp.async.wait_group alone makes
// them visible to it: no block barrier is needed for the tile.
#ifndef GDN_KERNELS_CUDA_RECURRENT_PERSISTENT_KERNEL_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_PERSISTENT_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/cp_async.cuh"
#include "kernels/cuda/common/pdl.cuh"
#include "kernels/cuda/recurrent_item.cuh"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/cuda/recurrent_quant.cuh"
#include "kernels/cuda/recurrent_shape.cuh"
#include "kernels/cuda/recurrent_tokens.cuh"

namespace gdn::cuda {

// Two tile buffers of row vectors (Shape::RowBits), then for int8 / fp8 two
// scale slots of the tile's kVTile / kStateScaleCols floats
// (recurrent_quant.cuh).
template <typename Shape>
inline constexpr size_t kPersistentTileSmemBytes =
    2u * Shape::kRowsPerThread * Shape::kThreads * sizeof(typename Shape::RowBits) +
    (kQuantState<typename Shape::StateT> ? 2u * Shape::kVTile / kStateScaleCols * sizeof(float)
                                         : 0u);

// The scale slot of `stage` (int8 / fp8), after the two tile buffers.
template <typename Shape>
__device__ __forceinline__ float* ScaleSlot(typename Shape::RowBits* buffers, int stage) {
  return reinterpret_cast<float*>(buffers + 2 * Shape::kRowsPerThread * Shape::kThreads) +
         stage * (Shape::kVTile / kStateScaleCols);
}

// Row group 0 copies the tile's scales into the slot (int8 / fp8 only);
// the block barrier after the tile's wait makes them visible to all.
template <typename Shape>
__device__ __forceinline__ void PrefetchScales(const RecurrentParams& p, const RecurrentItem& it,
                                               float* slot) {
  if constexpr (kQuantState<typename Shape::StateT>) {
    const int col_group = threadIdx.x % Shape::kThreadsPerRow;
    if (threadIdx.x >= Shape::kThreadsPerRow) return;  // row group 0 only
    const char* src = p.pool_base + (int64_t)it.initial_page * p.page_bytes +
                      ThreadScaleOffset<Shape>(p, it);
    constexpr int kGroups = Shape::kCols / kStateScaleCols;
#pragma unroll
    for (int i = 0; i < kGroups / 4; ++i) {
      CopyAsync16ThroughL1(slot + col_group * kGroups + 4 * i, src + 16 * i);
    }
  }
}

// Issues the cp.async copies of this thread's rows of `it`'s initial tile
// into buffer `stage` (nothing for a zero or unusable initial page).
template <typename Shape>
__device__ __forceinline__ void PrefetchTile(const RecurrentParams& p, const RecurrentItem& it,
                                             typename Shape::RowBits* buffers, int stage) {
  using StateT = typename Shape::StateT;
  if (it.initial_page < 0 || !it.pages_ok) return;
  const StateT* src = reinterpret_cast<const StateT*>(
      p.pool_base + (int64_t)it.initial_page * p.page_bytes) + ThreadTileOffset<Shape>(it);
#pragma unroll
  for (int r = 0; r < Shape::kRowsPerThread; ++r) {
    typename Shape::RowBits* slot =
        buffers + (stage * Shape::kRowsPerThread + r) * Shape::kThreads + threadIdx.x;
    CopyRowAsync(slot, src + (int64_t)r * Shape::kRowGroups * Shape::kV);
  }
  PrefetchScales<Shape>(p, it, ScaleSlot<Shape>(buffers, stage));
}

template <typename Shape>
__global__ void __launch_bounds__(Shape::kThreads, Shape::kMinBlocks)
    GdnRecurrentPersistentKernel(const RecurrentParams p, int num_items) {
  using StateT = typename Shape::StateT;
  constexpr int kRows = Shape::kRowsPerThread;
  __shared__ RecurrentSmem<Shape> smem;
  extern __shared__ uint4 dynamic_smem[];
  // [2][kRows][kThreads] row vectors, then the scale slots.
  auto* tile_buffers = reinterpret_cast<typename Shape::RowBits*>(dynamic_smem);

  TriggerDependentLaunch();
  int item = blockIdx.x;
  if (item >= num_items) return;
  const ItemDivisors div = MakeItemDivisors(p);
  RecurrentItem cur = LoadItem<Shape>(p, item, div);
  if (p.pdl) PrefetchTileL2<Shape>(p, cur);  // a hint; the copy waits below
  GridDependencyWait();  // PDL: state pages only after the previous kernel
  PrefetchTile<Shape>(p, cur, tile_buffers, 0);
  CopyAsyncCommit();
  int stage = 0;
  int buffer = 0;
  bool stored = false;  // the previous item stored its tile
  for (;;) {
    const int next_item = item + gridDim.x;
    const bool has_next = next_item < num_items;
    RecurrentItem next = cur;
    if (has_next) next = LoadItem<Shape>(p, next_item, div);
    // The previous item's staged tokens are consumed. An int8 / fp8 store
    // has a block barrier (its max |x| exchange, recurrent_quant.cuh) after
    // the item's last reads of staged tokens and scales, so after one this
    // barrier is not needed: one of the five barriers of a decode item.
    if (!kQuantState<StateT> || !stored) __syncthreads();
    StageTokens<Shape>(p, smem, cur.bos, min(cur.eos - cur.bos, kTokensPerChunk), cur.head,
                       cur.qk_head, cur.col0);
    if (has_next) {
      PrefetchTile<Shape>(p, next, tile_buffers, stage ^ 1);
      PrefetchTokensL2<Shape>(p, next);
    }
    CopyAsyncCommit();
    CopyAsyncWait<1>();  // this item's tile has landed
    float s[kRows][Shape::kCols];
    const bool has_state = cur.initial_page >= 0 && cur.pages_ok;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const typename Shape::RowBits raw =
          has_state ? tile_buffers[(stage * kRows + r) * Shape::kThreads + threadIdx.x]
                    : typename Shape::RowBits{};
      UnpackState<StateT, Shape::kCols>(raw, s[r]);
    }
    __syncthreads();  // staged tokens (and an int8 / fp8 tile's scales) visible
    if constexpr (kQuantState<StateT>) {
      const int col_group = threadIdx.x % Shape::kThreadsPerRow;
      if (has_state) {
        ApplyScales(s,
                    ScaleSlot<Shape>(tile_buffers, stage) +
                        col_group * (Shape::kCols / kStateScaleCols),
                    cur.eos > cur.bos ? smem.decay[0] : 1.0f);
      }
    }
    RunItemTokens<Shape>(p, smem, cur, s, buffer);
    stored = cur.pages_ok;
    if (!has_next) break;
    cur = next;
    item = next_item;
    stage ^= 1;
  }
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_PERSISTENT_KERNEL_CUH_
