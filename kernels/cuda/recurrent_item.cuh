// The work items of the recurrent GDN kernels (device code): one item is
// one (sequence, value head, V tile); where it lives (token range, pages,
// this thread's place in the tile), the item index decoded by multiply-high
// divisors, and the L2 prefetch hints of its state tile and first token.
#ifndef GDN_KERNELS_CUDA_RECURRENT_ITEM_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_ITEM_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/page_ids.cuh"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/cuda/recurrent_quant.cuh"
#include "kernels/cuda/recurrent_shape.cuh"
#include "kernels/gdn_params.h"

namespace gdn::cuda {

// Asks L2 to fetch the line holding `ptr` (a hint with no semantic effect:
// loads after GridDependencyWait still see the previous kernel's writes,
// which land in L2). Issued for the state tile before the wait, so the tile
// comes from L2 instead of DRAM once the wait returns.
__device__ __forceinline__ void PrefetchL2(const void* ptr) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr));
}

// Where one block's work item lives: (sequence, value head, V tile), its
// token range and pages, and this thread's place in the tile.
struct RecurrentItem {
  int seq, head, qk_head, col0;
  int bos, eos;
  int initial_page, final_page;
  // Every id usable (kZeroStatePage counts as usable initial / checkpoint).
  // An int, not a bool: as a byte ptxas packed it with another flag and
  // spilled the pair across the item in the 96-register persistent int8 /
  // fp8 instances.
  int pages_ok;
};

// Division of a non-negative int below 2^31 by a runtime divisor d >= 1 as
// a multiply-high, an add and a shift (the round-up magic of Granlund and
// Montgomery: mul = 2^32 (2^shift - d) / d + 1, shift = ceil(log2 d), the
// quotient (umulhi(n, mul) + n) >> shift). The persistent kernels decode one
// item index per item; the two integer divisions by num_v_heads and
// group_size were ~100 of the ~1700 instructions of a decode item.
struct FastDivisor {
  uint32_t mul, shift;
};

__device__ __forceinline__ FastDivisor MakeFastDivisor(int d) {
  const uint32_t ud = static_cast<uint32_t>(d);
  const uint32_t shift = ud > 1 ? 32u - __clz(ud - 1) : 0u;
  const uint64_t mul = (((uint64_t{1} << shift) - ud) << 32) / ud + 1;
  return {static_cast<uint32_t>(mul), shift};
}

__device__ __forceinline__ int FastDiv(int n, FastDivisor d) {
  const uint32_t un = static_cast<uint32_t>(n);
  return static_cast<int>((__umulhi(un, d.mul) + un) >> d.shift);
}

// The runtime divisors of an item index (once per block).
struct ItemDivisors {
  FastDivisor heads;  // num_v_heads
  FastDivisor group;  // group_size
};

__device__ __forceinline__ ItemDivisors MakeItemDivisors(const RecurrentParams& p) {
  return {MakeFastDivisor(p.num_v_heads), MakeFastDivisor(p.group_size)};
}

// item = (seq * Hv + head) * kTilesPerHead + tile; seq, head and qk_head
// given, the rest read from the params.
template <typename Shape>
__device__ __forceinline__ RecurrentItem LoadItemAt(const RecurrentParams& p, int item, int seq,
                                                    int head, int qk_head) {
  RecurrentItem it;
  it.seq = seq;
  it.head = head;
  it.qk_head = qk_head;
  it.col0 = (item % Shape::kTilesPerHead) * Shape::kVTile;
  it.bos = p.cu_seqlens[it.seq];
  it.eos = p.cu_seqlens[it.seq + 1];
  it.initial_page = p.initial_pages[it.seq];
  it.final_page = p.final_pages[it.seq];
  const bool initial_ok = GDN_PAGE_IN_POOL_OR_ZERO(it.initial_page, p.num_pages);
  const bool final_ok = GDN_PAGE_IN_POOL(it.final_page, p.num_pages);
  it.pages_ok = initial_ok && final_ok;
  // The prefix-state pages this sequence writes (RecurrentParams::
  // checkpoint_interval); RunItemTokens needs no count: a multiple of the
  // interval before the sequence's end is one of them.
  const int checkpoint_count = CheckpointCount(it.eos - it.bos, p.checkpoint_interval);
  for (int m = 0; m < checkpoint_count; ++m) {
    const int id = p.checkpoint_pages[it.seq * p.checkpoints_per_seq + m];
    it.pages_ok &= GDN_PAGE_IN_POOL_OR_ZERO(id, p.num_pages);
  }
  return it;
}

template <typename Shape>
__device__ __forceinline__ RecurrentItem LoadItem(const RecurrentParams& p, int item) {
  const int seq_head = item / Shape::kTilesPerHead;
  const int head = seq_head % p.num_v_heads;
  return LoadItemAt<Shape>(p, item, seq_head / p.num_v_heads, head, head / p.group_size);
}

// The same with the divisors precomputed (the persistent kernels).
template <typename Shape>
__device__ __forceinline__ RecurrentItem LoadItem(const RecurrentParams& p, int item,
                                                  const ItemDivisors& div) {
  const int seq_head = item / Shape::kTilesPerHead;
  const int seq = FastDiv(seq_head, div.heads);
  const int head = seq_head - seq * p.num_v_heads;
  return LoadItemAt<Shape>(p, item, seq, head, FastDiv(head, div.group));
}

// Element offset of this thread's first state row in a page: rows
// r * kRowGroups + row_group, columns [my_col, my_col + kCols).
template <typename Shape>
__device__ __forceinline__ int64_t ThreadTileOffset(const RecurrentItem& it) {
  const int row_group = threadIdx.x / Shape::kThreadsPerRow;
  const int my_col = it.col0 + (threadIdx.x % Shape::kThreadsPerRow) * Shape::kCols;
  return (int64_t)it.head * Shape::kK * Shape::kV + (int64_t)row_group * Shape::kV + my_col;
}

// PDL prologue: L2 prefetch of this thread's rows of `it`'s initial tile.
template <typename Shape>
__device__ __forceinline__ void PrefetchTileL2(const RecurrentParams& p,
                                               const RecurrentItem& it) {
  using StateT = typename Shape::StateT;
  if (it.initial_page < 0 || !it.pages_ok) return;
  const StateT* src = reinterpret_cast<const StateT*>(
      p.pool_base + (int64_t)it.initial_page * p.page_bytes) + ThreadTileOffset<Shape>(it);
#pragma unroll
  for (int r = 0; r < Shape::kRowsPerThread; ++r) {
    PrefetchL2(src + (int64_t)r * Shape::kRowGroups * Shape::kV);
  }
}

// A hint for the persistent kernels: the L2 lines of `it`'s first token's
// inputs (q and k rows, the v tile, the gates), asked for by the last warp
// one item ahead, so that StageTokens' loads (on the critical path of a
// decode item: one warp stages while the others wait at a barrier) hit L2.
template <typename Shape>
__device__ __forceinline__ void PrefetchTokensL2(const RecurrentParams& p,
                                                 const RecurrentItem& it) {
  using InT = typename Shape::InT;
  constexpr int kQkLines = (Shape::kK * static_cast<int>(sizeof(InT)) + 127) / 128;
  constexpr int kVLines = (Shape::kVTile * static_cast<int>(sizeof(InT)) + 127) / 128;
  static_assert(2 * kQkLines + kVLines + 2 <= 32, "one line per lane");
  const int lane = static_cast<int>(threadIdx.x) - 32 * (Shape::kWarps - 1);
  if (lane < 0 || it.eos <= it.bos || !it.pages_ok) return;
  const int64_t tok = it.bos;
  const int64_t qk = (tok * p.num_qk_heads + it.qk_head) * Shape::kK;
  const int64_t gi = tok * p.num_v_heads + it.head;
  const void* line = nullptr;
  if (lane < kQkLines) {
    line = static_cast<const char*>(p.q) + qk * sizeof(InT) + 128 * lane;
  } else if (lane < 2 * kQkLines) {
    line = static_cast<const char*>(p.k) + qk * sizeof(InT) + 128 * (lane - kQkLines);
  } else if (lane < 2 * kQkLines + kVLines) {
    line = static_cast<const char*>(p.v) +
           ((gi * Shape::kV + it.col0) * sizeof(InT) + 128 * (lane - 2 * kQkLines));
  } else if (lane == 2 * kQkLines + kVLines) {
    line = (p.fused_gating ? p.a : p.g) + gi;
  } else if (lane == 2 * kQkLines + kVLines + 1) {
    line = (p.fused_gating ? p.b : p.beta) + gi;
  }
  if (line != nullptr) PrefetchL2(line);
}

// Byte offset of this thread's kCols scales in a page (int8 / fp8).
template <typename Shape>
__device__ __forceinline__ int64_t ThreadScaleOffset(const RecurrentParams& p,
                                                     const RecurrentItem& it) {
  const int my_col = it.col0 + (threadIdx.x % Shape::kThreadsPerRow) * Shape::kCols;
  return ScaleOffset(p.num_v_heads, Shape::kK, Shape::kV, it.head, my_col);
}
}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_ITEM_CUH_
