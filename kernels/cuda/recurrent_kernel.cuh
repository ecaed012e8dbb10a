// The recurrent GDN kernel (device code): one block per (sequence, value
// head, V tile), the [K, VT] state tile in registers for all of the
// sequence's tokens, one read and one write of the tile per call.
//
// Per token (shared/GDN.md), with the decayed old state D = exp(g) S:
//   u   = beta (v - D^T k)
//   o   = D^T (scale q) + (k . scale q) u        (= S_new^T (scale q))
//   S'  = D + k u^T
// so D^T k and D^T q come out of ONE reduction over K per token, computed
// from the old state: sum_K S[k][c] * k[k] times exp(g).
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
#ifndef GDN_KERNELS_CUDA_RECURRENT_KERNEL_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_KERNEL_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_pdl.h"
#include "kernels/cuda/recurrent_elements.cuh"
#include "kernels/cuda/recurrent_instances.h"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/cuda/recurrent_quant.cuh"
#include "kernels/cuda/recurrent_quant_token.cuh"
#include "kernels/gating.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda {

// Tokens staged in shared memory at a time (= the decode bound).
inline constexpr int kTokensPerChunk = kMaxDecodeTokens;
static_assert(kCheckpointTokens % kTokensPerChunk == 0, "checkpoints end token chunks");

// State rows (Shape::RowBits: 16 bytes, 8 for int8 / fp8 codes), streamed
// (read once, written once per call), so both go around L1 and are marked
// evict-first in L2.
template <typename RowBits>
__device__ __forceinline__ RowBits LoadStateRow(const void* ptr) {
  return __ldcs(reinterpret_cast<const RowBits*>(ptr));
}
template <typename RowBits>
__device__ __forceinline__ void StoreStateRow(void* ptr, RowBits value) {
  __stcs(reinterpret_cast<RowBits*>(ptr), value);
}

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

// ---- programmatic dependent launch (sm_90) ----------------------------------

// Lets the next kernel on the stream (if it was launched with programmatic
// stream serialization) start its prologue now; its own GridDependencyWait
// still waits for this whole grid to finish and flush.
__device__ __forceinline__ void TriggerDependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the previous kernel on the stream has completed and its memory
// is visible. A no-op when this kernel was launched without the attribute.
__device__ __forceinline__ void GridDependencyWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Asks L2 to fetch the line holding `ptr` (a hint with no semantic effect:
// loads after GridDependencyWait still see the previous kernel's writes,
// which land in L2). Issued for the state tile before the wait, so the tile
// comes from L2 instead of DRAM once the wait returns.
__device__ __forceinline__ void PrefetchL2(const void* ptr) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr));
}

// ---- compile-time block shape ---------------------------------------------

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
// the double-buffered cross-warp reduction.
template <typename Shape>
struct RecurrentSmem {
  float q[kTokensPerChunk][Shape::kK];  // normalised, times scale
  float k[kTokensPerChunk][Shape::kK];  // normalised
  float v[kTokensPerChunk][Shape::kVTile];
  float decay[kTokensPerChunk];  // exp(g)
  float beta[kTokensPerChunk];
  float kq[kTokensPerChunk];  // k . (scale q)
  // [buffer][warp][0: D^T k, 1: D^T q][column]
  alignas(16) float partial[2][Shape::kWarps][2][Shape::kVTile];
  // int8 / fp8 stores (recurrent_quant.cuh): each warp's max |x| (AbsBits)
  // per scale group of the tile, [0] for the final store and [1] for the
  // prefix-state stores (StoreTile); one element for the other dtypes.
  static constexpr bool kQuant = kQuantState<typename Shape::StateT>;
  uint32_t amax[kQuant ? 2 : 1][kQuant ? Shape::kWarps : 1]
               [kQuant ? Shape::kVTile / kStateScaleCols : 1];
  float u[kQuant ? Shape::kVTile : 1];  // int8 / fp8 token step: u per column
};

// Stages tokens [tok0, tok0 + n) of one (sequence, head) into shared memory:
// warp w handles tokens w, w + kWarps, ...; the block's threads together
// load the v tile. The caller synchronises afterwards.
template <typename Shape>
__device__ __forceinline__ void StageTokens(const RecurrentParams& p,
                                            RecurrentSmem<Shape>& smem,
                                            int tok0, int n, int head,
                                            int qk_head, int col0) {
  using InT = typename Shape::InT;
  constexpr int kPer = Shape::kQkPerLane;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int Hv = p.num_v_heads;
  for (int t = warp; t < n; t += Shape::kWarps) {
    const int64_t tok = tok0 + t;
    const int64_t qk_offset = (tok * p.num_qk_heads + qk_head) * Shape::kK + lane * kPer;
    float q[kPer], k[kPer];
    LoadAsFloats<InT, kPer>(static_cast<const InT*>(p.q) + qk_offset, q);
    LoadAsFloats<InT, kPer>(static_cast<const InT*>(p.k) + qk_offset, k);
    float gate_g = 0.0f, gate_beta = 0.0f;
    if (lane == 0) {
      const int64_t gi = tok * Hv + head;
      if (p.fused_gating) {
        gate_g = FusedDecay(p.a[gi], p.A_log[head], p.dt_bias[head]);
        gate_beta = FusedBeta(p.b[gi]);
      } else {
        gate_g = p.g[gi];
        gate_beta = p.beta[gi];
      }
    }
    float qq = 0.0f, kk = 0.0f, kq = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      qq += q[i] * q[i];
      kk += k[i] * k[i];
      kq += k[i] * q[i];
    }
#pragma unroll
    for (int offset = 16; offset >= 1; offset /= 2) {
      qq += __shfl_xor_sync(0xffffffffu, qq, offset);
      kk += __shfl_xor_sync(0xffffffffu, kk, offset);
      kq += __shfl_xor_sync(0xffffffffu, kq, offset);
    }
    float q_factor = p.scale, k_factor = 1.0f;
    if (p.l2_norm_qk) {
      float q_eps = kL2NormEps, k_eps = kL2NormEps;
      // Rare: a row with max|x| >= ~2^60 overflowed its sum of squares; it
      // is rescaled by kL2NormRescale (gdn_types.h) and the sums redone. The
      // butterfly leaves bitwise equal sums on every lane: a uniform branch.
      if (!isfinite(qq) || !isfinite(kk)) {
        const float cq = isfinite(qq) ? 1.0f : kL2NormRescale;
        const float ck = isfinite(kk) ? 1.0f : kL2NormRescale;
        if (cq != 1.0f) q_eps = 0.0f;  // 2^-200 below the rescaled sum
        if (ck != 1.0f) k_eps = 0.0f;
        qq = kk = kq = 0.0f;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          q[i] *= cq;
          k[i] *= ck;
          qq += q[i] * q[i];
          kk += k[i] * k[i];
          kq += k[i] * q[i];
        }
#pragma unroll
        for (int offset = 16; offset >= 1; offset /= 2) {
          qq += __shfl_xor_sync(0xffffffffu, qq, offset);
          kk += __shfl_xor_sync(0xffffffffu, kk, offset);
          kq += __shfl_xor_sync(0xffffffffu, kq, offset);
        }
      }
      const float rq = 1.0f / sqrtf(qq + q_eps);
      const float rk = 1.0f / sqrtf(kk + k_eps);
      q_factor *= rq;
      k_factor = rk;
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      smem.q[t][lane * kPer + i] = q[i] * q_factor;
      smem.k[t][lane * kPer + i] = k[i] * k_factor;
    }
    if (lane == 0) {
      smem.kq[t] = kq * q_factor * k_factor;
      smem.decay[t] = expf(gate_g);
      smem.beta[t] = gate_beta;
    }
  }
  // v: thread i stages column i % kVTile of tokens i / kVTile, i / kVTile +
  // kThreads / kVTile, ... (a rolled loop: one pass for a decode token).
  static_assert(Shape::kThreads % Shape::kVTile == 0, "whole v tile rows per pass");
  constexpr int kTokensPerPass = Shape::kThreads / Shape::kVTile;
  const int c = threadIdx.x % Shape::kVTile;
  const InT* v = static_cast<const InT*>(p.v) + (int64_t)head * Shape::kV + col0 + c;
#pragma unroll 1
  for (int t = threadIdx.x / Shape::kVTile; t < n; t += kTokensPerPass) {
    smem.v[t][c] = ToFloat(v[(int64_t)(tok0 + t) * Hv * Shape::kV]);
  }
}

// Where one block's work item lives: (sequence, value head, V tile), its
// token range and pages, and this thread's place in the tile.
struct RecurrentItem {
  int seq, head, qk_head, col0;
  int bos, eos;
  int initial_page, final_page;
  int checkpoint_count;  // prefix states to write (RecurrentParams::checkpoint_interval)
  bool pages_ok;  // every id usable (kZeroStatePage counts as usable initial / checkpoint)
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
  const bool initial_ok = it.initial_page == kZeroStatePage ||
                          (it.initial_page >= 0 && it.initial_page < p.num_pages);
  const bool final_ok = it.final_page >= 0 && it.final_page < p.num_pages;
  it.pages_ok = initial_ok && final_ok;
  it.checkpoint_count = CheckpointCount(it.eos - it.bos, p.checkpoint_interval);
  for (int m = 0; m < it.checkpoint_count; ++m) {
    const int id = p.checkpoint_pages[it.seq * p.checkpoints_per_seq + m];
    it.pages_ok &= id == kZeroStatePage || (id >= 0 && id < p.num_pages);
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

// The state tile in registers (this thread's rows) into page `page`;
// last_token: the last token the state has seen (int8 / fp8 rounding salt).
// int8 / fp8: `final` picks the amax buffer, since the store has no barrier
// before its amax writes: a prefix-state store may be followed at once by
// the final store, but two stores into one buffer are always separated by
// a block barrier (a token step's, for prefix states; the next item's
// staging barrier, for final stores).
template <typename Shape>
__device__ __forceinline__ void StoreTile(const RecurrentParams& p, RecurrentSmem<Shape>& smem,
                                          const RecurrentItem& it, int page,
                                          const float (&s)[Shape::kRowsPerThread][Shape::kCols],
                                          int64_t last_token, bool final) {
  using StateT = typename Shape::StateT;
  if constexpr (kQuantState<StateT>) {
    StoreQuantTile<Shape>(p, &smem.amax[final ? 0 : 1][0][0], it.head, it.col0, page, s,
                          last_token);
  } else {
    StateT* dst = reinterpret_cast<StateT*>(p.pool_base + (int64_t)page * p.page_bytes) +
                  ThreadTileOffset<Shape>(it);
#pragma unroll
    for (int r = 0; r < Shape::kRowsPerThread; ++r) {
      StoreStateRow<uint4>(dst + (int64_t)r * Shape::kRowGroups * Shape::kV,
                           PackState<StateT, Shape::kCols>(s[r]));
    }
  }
}

// Row group 0 copies the tile's scales into the slot (int8 / fp8 only);
// the block barrier after the tile's wait makes them visible to all.
template <typename Shape>
__device__ __forceinline__ void PrefetchScales(const RecurrentParams& p, const RecurrentItem& it,
                                               float* slot) {
  if constexpr (kQuantState<typename Shape::StateT>) {
    const int col_group = threadIdx.x % Shape::kThreadsPerRow;
    if (threadIdx.x / Shape::kThreadsPerRow != 0) return;
    const char* src = p.pool_base + (int64_t)it.initial_page * p.page_bytes +
                      ThreadScaleOffset<Shape>(p, it);
    constexpr int kGroups = Shape::kCols / kStateScaleCols;
#pragma unroll
    for (int i = 0; i < kGroups / 4; ++i) {
      CopyScalesAsync(slot + col_group * kGroups + 4 * i, src + 16 * i);
    }
  }
}

// Runs every token of one item over the state tile in registers `s`, then
// stores the tile to the final page (and, every checkpoint_interval tokens,
// to the prefix-state pages). Expects the item's first chunk staged
// (StageTokens) and a __syncthreads since; `buffer` is the reduction
// buffer parity, carried across items.
template <typename Shape>
__device__ __forceinline__ void RunItemTokens(const RecurrentParams& p,
                                              RecurrentSmem<Shape>& smem,
                                              const RecurrentItem& it,
                                              float (&s)[Shape::kRowsPerThread][Shape::kCols],
                                              int& buffer) {
  using InT = typename Shape::InT;
  constexpr int kCols = Shape::kCols;
  constexpr int kRows = Shape::kRowsPerThread;
  constexpr int kRowGroups = Shape::kRowGroups;
  constexpr int kThreadsPerRow = Shape::kThreadsPerRow;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int col_group = threadIdx.x % kThreadsPerRow;  // which 16-byte vector
  const int row_group = threadIdx.x / kThreadsPerRow;  // rows r * kRowGroups + row_group
  const int my_col = it.col0 + col_group * kCols;

  InT* o = static_cast<InT*>(p.o);
  int n = min(it.eos - it.bos, kTokensPerChunk);
  // Per-token states (kPerTokenStates: speculative drafts of at most
  // kTokensPerChunk tokens) split a chunk into runs of one token, so the one
  // prefix-state store below serves both kinds; other calls run each chunk
  // as one run, as before.
  const int run_length = p.checkpoint_interval == kPerTokenStates ? 1 : kTokensPerChunk;
  for (int chunk_start = it.bos; chunk_start < it.eos;) {
    for (int t = 0; t < n;) {
      const int run_end = min(n, t + run_length);
      for (; t < run_end; ++t) {
        if constexpr (kQuantState<typename Shape::StateT>) {
          // s holds the decayed state for the item's first token (the kernels
          // fold exp(g_0) into the scales).
          QuantTokenStep<Shape>(p, smem, it.head, it.col0, it.pages_ok, t, chunk_start + t,
                                chunk_start + t == it.bos, s);
          continue;
        }
        const float decay = smem.decay[t];
        float dk[kCols], dq[kCols];  // partial S^T k, S^T q over my rows
#pragma unroll
        for (int c = 0; c < kCols; ++c) dk[c] = dq[c] = 0.0f;
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float kr = smem.k[t][r * kRowGroups + row_group];
          const float qr = smem.q[t][r * kRowGroups + row_group];
#pragma unroll
          for (int c = 0; c < kCols; ++c) {
            dk[c] = fmaf(s[r][c], kr, dk[c]);
            dq[c] = fmaf(s[r][c], qr, dq[c]);
          }
        }
        // Row groups inside a warp: lanes kThreadsPerRow apart.
#pragma unroll
        for (int offset = kThreadsPerRow; offset < 32; offset *= 2) {
#pragma unroll
          for (int c = 0; c < kCols; ++c) {
            dk[c] += __shfl_xor_sync(0xffffffffu, dk[c], offset);
            dq[c] += __shfl_xor_sync(0xffffffffu, dq[c], offset);
          }
        }
        if (lane < kThreadsPerRow) {
#pragma unroll
          for (int c = 0; c < kCols; ++c) {
            smem.partial[buffer][warp][0][col_group * kCols + c] = dk[c];
            smem.partial[buffer][warp][1][col_group * kCols + c] = dq[c];
          }
        }
        __syncthreads();
        float sk[kCols], sq[kCols];
#pragma unroll
        for (int c = 0; c < kCols; ++c) sk[c] = sq[c] = 0.0f;
#pragma unroll
        for (int w = 0; w < Shape::kWarps; ++w) {
#pragma unroll
          for (int c = 0; c < kCols; ++c) {
            sk[c] += smem.partial[buffer][w][0][col_group * kCols + c];
            sq[c] += smem.partial[buffer][w][1][col_group * kCols + c];
          }
        }
        buffer ^= 1;

        const float beta = smem.beta[t];
        const float kq = smem.kq[t];
        float u[kCols], out[kCols];
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          u[c] = beta * (smem.v[t][col_group * kCols + c] - decay * sk[c]);
          out[c] = fmaf(decay, sq[c], kq * u[c]);
        }
        if (row_group == 0) {
          InT* dst =
              o + ((int64_t)(chunk_start + t) * p.num_v_heads + it.head) * Shape::kV + my_col;
          if (!it.pages_ok) {
#pragma unroll
            for (int c = 0; c < kCols; ++c) out[c] = __int_as_float(0x7fc00000);
          }
          StoreFromFloats<InT, kCols>(dst, out);
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float kr = smem.k[t][r * kRowGroups + row_group];
#pragma unroll
          for (int c = 0; c < kCols; ++c) s[r][c] = fmaf(s[r][c], decay, kr * u[c]);
        }
      }
      // A prefix state after this run: kTokensPerChunk divides
      // kCheckpointTokens, so every multiple of a larger interval ends a chunk.
      const int done = chunk_start + t - it.bos;
      if (p.checkpoint_interval > 0 && it.pages_ok && done % p.checkpoint_interval == 0 &&
          done / p.checkpoint_interval <= it.checkpoint_count) {
        const int id =
            p.checkpoint_pages[it.seq * p.checkpoints_per_seq + done / p.checkpoint_interval - 1];
        if (id != kZeroStatePage) {
          StoreTile<Shape>(p, smem, it, id, s, chunk_start + t - 1, false);
        }
      }
    }
    chunk_start += n;
    if (chunk_start < it.eos) {  // prefill: stage the next chunk
      __syncthreads();  // everyone is done reading this chunk
      n = min(it.eos - chunk_start, kTokensPerChunk);
      StageTokens<Shape>(p, smem, chunk_start, n, it.head, it.qk_head, it.col0);
      __syncthreads();
    }
  }

  if (it.pages_ok) StoreTile<Shape>(p, smem, it, it.final_page, s, it.eos - 1, true);
}

// One block per item: load the tile (registers), stage the tokens, run.
// kPdl (launched with programmatic dependent launch) orders the prologue
// differently; a template parameter rather than a branch on p.pdl so the
// plain instance keeps its registers (the wide fp32 shape is capped at 64).
template <typename Shape, bool kPdl>
__global__ void __launch_bounds__(Shape::kThreads, Shape::kMinBlocks)
    GdnRecurrentKernel(const RecurrentParams p) {
  using StateT = typename Shape::StateT;
  constexpr int kRows = Shape::kRowsPerThread;
  __shared__ RecurrentSmem<Shape> smem;

  TriggerDependentLaunch();
  const RecurrentItem it = LoadItem<Shape>(p, blockIdx.x);
  if constexpr (kPdl) {
    // PDL: the inputs are staged while the previous kernel may still run;
    // the state tile (which it may be writing) is only prefetched into L2
    // before the wait and loaded after it.
    PrefetchTileL2<Shape>(p, it);
    StageTokens<Shape>(p, smem, it.bos, min(it.eos - it.bos, kTokensPerChunk), it.head,
                       it.qk_head, it.col0);
    GridDependencyWait();
  }
  // Issue the state loads first: they are the bulk of the bytes, and the
  // token staging below (without PDL) overlaps with them.
  typename Shape::RowBits raw[kRows];
  const bool has_state = it.initial_page >= 0 && it.pages_ok;
  [[maybe_unused]] ThreadScales<kQuantState<StateT> ? Shape::kCols : 8> scales;
  if (has_state) {
    const char* page = p.pool_base + (int64_t)it.initial_page * p.page_bytes;
    const StateT* src = reinterpret_cast<const StateT*>(page) + ThreadTileOffset<Shape>(it);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      raw[r] = LoadStateRow<typename Shape::RowBits>(src + (int64_t)r * Shape::kRowGroups *
                                                                 Shape::kV);
    }
    if constexpr (kQuantState<StateT>) {
      LoadThreadScales(page, ThreadScaleOffset<Shape>(p, it), scales);
    }
  } else {
#pragma unroll
    for (int r = 0; r < kRows; ++r) raw[r] = {};
  }
  if constexpr (!kPdl) {
    StageTokens<Shape>(p, smem, it.bos, min(it.eos - it.bos, kTokensPerChunk), it.head,
                       it.qk_head, it.col0);
  }
  float s[kRows][Shape::kCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r) UnpackState<StateT, Shape::kCols>(raw[r], s[r]);
  __syncthreads();  // staged tokens visible (the first decay below)
  if constexpr (kQuantState<StateT>) {
    if (has_state) ApplyScales(s, scales.s, it.eos > it.bos ? smem.decay[0] : 1.0f);
  }
  int buffer = 0;
  RunItemTokens<Shape>(p, smem, it, s, buffer);
}

// Host launcher of one compiled instance: grid (N * Hv * V / VTile).
template <typename Shape>
absl::Status LaunchRecurrentInstance(const RecurrentParams& params, cudaStream_t stream) {
  const int64_t blocks = (int64_t)params.num_seqs * params.num_v_heads * Shape::kTilesPerHead;
  if (blocks > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("grid of ", blocks, " blocks is too large"));
  }
  if (params.pdl) {
    GDN_CUDA_RETURN_IF_ERROR(LaunchMaybePdl(GdnRecurrentKernel<Shape, true>,
                                            static_cast<unsigned>(blocks), Shape::kThreads, 0,
                                            stream, true, params));
  } else {
    GDN_CUDA_RETURN_IF_ERROR(LaunchMaybePdl(GdnRecurrentKernel<Shape, false>,
                                            static_cast<unsigned>(blocks), Shape::kThreads, 0,
                                            stream, false, params));
  }
  return absl::OkStatus();
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_KERNEL_CUH_
