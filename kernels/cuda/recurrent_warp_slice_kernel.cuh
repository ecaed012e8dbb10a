// The warp-slice recurrent kernel (RecurrentVariant::kWarpSlice; device
// code, launcher in recurrent_launch.cuh): a persistent grid of independent
// warps, no block barrier and no shared-memory reduction anywhere.
//
// Why: the persistent kernel (recurrent_persistent_kernel.cuh) spends each
// item in a fixed chain of waits: one warp stages q / k / v / gates while the
// others wait at a barrier, then a block barrier per token for the
// cross-warp reduction over K (H200 profile: ~915 instructions per warp per
// item, 0.43 issued per scheduler cycle, 0.66 eligible warps;
// bench/results/2026-12-02-decode-shapes/). Here one warp owns all K rows of
// its columns, so the reduction over K is shuffles inside the warp, and
// every warp runs its own chain: the scheduler always has other warps'
// independent work.
//
// A unit of work is (sequence, value head, 16-column slice of V), indexed
// unit = (seq * Hv + head) * (V / 16) + slice; warp w of the grid takes units
// w, w + W, w + 2W, ... (W warps in all), so adjacent warps take adjacent
// slices of one (sequence, head) and share its q / k rows in L1 / L2.
// Tile layout and copies: recurrent_warp_slice_tile.cuh. Per unit, a warp:
//   - has the next unit's slice streaming into its other shared-memory stage
//     (cp.async) and the next unit's first-token inputs and the unit after
//     that's sequence bounds and page ids in flight in registers, so none of
//     the unit's loads waits on a dependent load;
//   - per token (shared/GDN.md; with D = exp(g) S):
//       loads and normalises q, k (NormalizeQk, the staging arithmetic of the
//       other variants), v for its columns, the gates;
//       partial S^T k and S^T q over the lane's rows for the 16 columns
//       (2 x 16 sums; lanes 16-31 accumulate the q sums in `mine`, so the
//       first exchange needs no selects), a reduce-scatter over the warp
//       (16 + 8 + 4 + 2 + 1 = 31 shuffles) leaving lane l the full sum of
//       column l & 15 (S^T k for l < 16, S^T q above), one exchange across
//       lane bit 4, then u and o per column on both halves, o written by
//       lanes 0-15, and u of every column broadcast (16 shuffles) for
//       S' = D + k u^T;
//     the arithmetic per element is the persistent kernel's: fp32 / bf16
//     RunItemTokens (u = beta (v - exp(g) S^T k), o = exp(g) S^T q +
//     (k . q) u, S' = S exp(g) + k u^T), int8 / fp8 QuantTokenStep (the
//     state decayed first, its first token's decay folded into the scales);
//   - stores prefix states and the final state (fp32 / bf16 through its
//     free stage, coalesced; int8 / fp8 with an in-warp column-pair amax).
// Pages: a bad page id (outside the pool; kZeroStatePage allowed for
// initial and prefix-state pages) reads and writes no page and sets the
// sequence's o to NaN, as the other variants. Any number of tokens per
// sequence (each token's inputs come straight from global memory), prefix
// states (checkpoint_interval, kPerTokenStates) and PDL as the persistent
// kernel: page ids, sequence bounds and the first tokens' inputs are read
// before griddepcontrol.wait, state pages and o only after it.
#ifndef GDN_KERNELS_CUDA_RECURRENT_WARP_SLICE_KERNEL_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_WARP_SLICE_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/cp_async.cuh"
#include "kernels/cuda/common/page_ids.cuh"
#include "kernels/cuda/common/pdl.cuh"
#include "kernels/cuda/common/vector_access.cuh"
#include "kernels/cuda/recurrent_item.cuh"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/cuda/recurrent_quant.cuh"
#include "kernels/cuda/recurrent_tokens.cuh"
#include "kernels/cuda/recurrent_warp_slice_tile.cuh"
#include "kernels/gating.h"
#include "kernels/gdn_params.h"

namespace gdn::cuda {

// ---- units ------------------------------------------------------------------

// The loads of a unit that later loads depend on (issued one unit earlier
// than they are needed; nothing branches on them until then).
struct UnitBounds {
  int bos, eos, initial_page, final_page;
};

__device__ __forceinline__ UnitBounds LoadUnitBounds(const RecurrentParams& p, int seq) {
  return {p.cu_seqlens[seq], p.cu_seqlens[seq + 1], p.initial_pages[seq], p.final_pages[seq]};
}

__device__ __forceinline__ int UnitSeq(int unit, int slices_per_head, const ItemDivisors& div) {
  return FastDiv(unit / slices_per_head, div.heads);
}

// The full unit from its bounds: head, columns, the page-id checks
// (recurrent_item.cuh LoadItemAt's, which reads prefix-state ids when
// checkpoint_interval > 0).
template <typename Shape>
__device__ __forceinline__ RecurrentItem MakeUnit(const RecurrentParams& p, int unit,
                                                  const UnitBounds& b, const ItemDivisors& div) {
  RecurrentItem it;
  const int seq_head = unit / Shape::kTilesPerHead;
  it.seq = FastDiv(seq_head, div.heads);
  it.head = seq_head - it.seq * p.num_v_heads;
  it.qk_head = FastDiv(it.head, div.group);
  it.col0 = (unit - seq_head * Shape::kTilesPerHead) * Shape::kCols;
  it.bos = b.bos;
  it.eos = b.eos;
  it.initial_page = b.initial_page;
  it.final_page = b.final_page;
  it.pages_ok = GDN_PAGE_IN_POOL_OR_ZERO(it.initial_page, p.num_pages) &&
                GDN_PAGE_IN_POOL(it.final_page, p.num_pages);
  it.checkpoint_count = CheckpointCount(it.eos - it.bos, p.checkpoint_interval);
  for (int m = 0; m < it.checkpoint_count; ++m) {
    const int id = p.checkpoint_pages[it.seq * p.checkpoints_per_seq + m];
    it.pages_ok &= GDN_PAGE_IN_POOL_OR_ZERO(id, p.num_pages);
  }
  return it;
}

// ---- token inputs -----------------------------------------------------------

// One token's inputs as loaded (converted when used): this lane's kRows
// elements of q and k, v of column col0 + (lane & 15), the raw gates (the
// per-head A_log and dt_bias of fused gating are read where used: L1 hits
// after the first unit of the head, and two registers fewer per copy).
template <typename Shape>
struct TokenLoads {
  Vec<typename Shape::InT, Shape::kRows> q, k;
  typename Shape::InT v;
  float gate, strength;  // g, beta (direct) or a, b (fused)
};

template <typename Shape>
__device__ __forceinline__ TokenLoads<Shape> LoadToken(const RecurrentParams& p,
                                                       const RecurrentItem& it, int64_t tok) {
  using InT = typename Shape::InT;
  using QkVec = Vec<InT, Shape::kRows>;
  const int lane = threadIdx.x % 32;
  TokenLoads<Shape> in;
  const int64_t qk = (tok * p.num_qk_heads + it.qk_head) * Shape::kK + lane * Shape::kRows;
  in.q = *reinterpret_cast<const QkVec*>(static_cast<const InT*>(p.q) + qk);
  in.k = *reinterpret_cast<const QkVec*>(static_cast<const InT*>(p.k) + qk);
  const int64_t gi = tok * p.num_v_heads + it.head;
  in.v = static_cast<const InT*>(p.v)[gi * Shape::kV + it.col0 + (lane & 15)];
  in.gate = (p.fused_gating ? p.a : p.g)[gi];
  in.strength = (p.fused_gating ? p.b : p.beta)[gi];
  return in;
}

// exp(g) of a token of head `head` (StageTokens' decay).
template <typename Shape>
__device__ __forceinline__ float TokenDecay(const RecurrentParams& p, int head,
                                            const TokenLoads<Shape>& in) {
  return expf(p.fused_gating ? FusedDecay(in.gate, p.A_log[head], p.dt_bias[head]) : in.gate);
}

// ---- one token ----------------------------------------------------------------

// Sums of 32 lanes' (mine, theirs) over the warp: lane l ends with the full
// sum of column l & 15 of kind l >> 4 (0: the kind lanes 0-15 keep in
// `mine`). Each step halves the values a lane keeps.
__device__ __forceinline__ float ReduceScatterColumns(const float (&mine)[16],
                                                      const float (&theirs)[16]) {
  float v[16];
#pragma unroll
  for (int c = 0; c < 16; ++c) v[c] = mine[c] + __shfl_xor_sync(0xffffffffu, theirs[c], 16);
  const auto add = [](float a, float b) { return a + b; };
  HalveAcrossLanes<8>(v, 8, add);
  HalveAcrossLanes<4>(v, 4, add);
  HalveAcrossLanes<2>(v, 2, add);
  HalveAcrossLanes<1>(v, 1, add);
  return v[0];
}

// One token of unit `it` over the slice s (see the file comment): `decayed`
// (int8 / fp8 only) says s already holds exp(g) S.
template <typename Shape>
__device__ __forceinline__ void SliceTokenStep(const RecurrentParams& p, const RecurrentItem& it,
                                               const TokenLoads<Shape>& in, int64_t tok,
                                               bool decayed,
                                               float (&s)[Shape::kRows][Shape::kCols]) {
  using InT = typename Shape::InT;
  constexpr int kRows = Shape::kRows, kCols = Shape::kCols;
  const int lane = threadIdx.x % 32;
  float q[kRows], k[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    q[r] = ToFloat(in.q.e[r]);
    k[r] = ToFloat(in.k.e[r]);
  }
  const QkFactors f = NormalizeQk<kRows>(p, q, k);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    q[r] *= f.q;
    k[r] *= f.k;
  }
  const float kq = f.kq * f.q * f.k;
  const float decay = TokenDecay<Shape>(p, it.head, in);
  const float beta = p.fused_gating ? FusedBeta(in.strength) : in.strength;
  if constexpr (Shape::kQuant) {
    if (!decayed) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int c = 0; c < kCols; ++c) s[r][c] *= decay;
    }
  }
  const bool q_lane = lane >= 16;
  float mine[kCols], theirs[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) mine[c] = theirs[c] = 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float a = q_lane ? q[r] : k[r];
    const float b = q_lane ? k[r] : q[r];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      mine[c] = fmaf(s[r][c], a, mine[c]);
      theirs[c] = fmaf(s[r][c], b, theirs[c]);
    }
  }
  const float sum = ReduceScatterColumns(mine, theirs);
  const float other = __shfl_xor_sync(0xffffffffu, sum, 16);
  const float sk = q_lane ? other : sum;  // (S^T k) or (D^T k), column lane & 15
  const float sq = q_lane ? sum : other;
  const float v = ToFloat(in.v);
  float u, out;
  if constexpr (Shape::kQuant) {  // QuantTokenStep
    u = beta * (v - sk);
    out = fmaf(kq, u, sq);
  } else {  // RunItemTokens
    u = beta * (v - decay * sk);
    out = fmaf(decay, sq, kq * u);
  }
  if (!it.pages_ok) out = __int_as_float(0x7fc00000);
  if (lane < 16) {
    static_cast<InT*>(p.o)[(tok * p.num_v_heads + it.head) * Shape::kV + it.col0 + lane] =
        FromFloat<InT>(out);
  }
  float uc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) uc[c] = __shfl_sync(0xffffffffu, u, c);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if constexpr (Shape::kQuant) {
        s[r][c] = fmaf(k[r], uc[c], s[r][c]);
      } else {
        s[r][c] = fmaf(s[r][c], decay, k[r] * uc[c]);
      }
    }
  }
}

// The slice into `page`: last_token salts int8 / fp8 stochastic rounding;
// `stage` is the warp's free stage (fp32 / bf16 stores go through it).
template <typename Shape>
__device__ __forceinline__ void StoreUnitSlice(const RecurrentParams& p, const RecurrentItem& it,
                                               int page, int64_t last_token, uint4* stage,
                                               const float (&s)[Shape::kRows][Shape::kCols]) {
  if constexpr (Shape::kQuant) {
    StoreQuantSlice<Shape>(p, it, page, last_token, s);
  } else {
    StoreSlice<Shape>(p, it, page, stage, s);
  }
}

// Every token of unit `it` (`first`: its first token's loads, issued a
// unit ahead; later tokens load theirs when they start: one more copy of
// the loads in flight cost the fp32-input instances ~10 registers and a
// spill, for multi-token calls only), the prefix states after the
// multiples of checkpoint_interval (after every token but the last for
// kPerTokenStates), then the final state.
template <typename Shape>
__device__ __forceinline__ void RunUnitTokens(const RecurrentParams& p, const RecurrentItem& it,
                                              const TokenLoads<Shape>& first, uint4* stage,
                                              float (&s)[Shape::kRows][Shape::kCols]) {
  for (int tok = it.bos; tok < it.eos; ++tok) {
    const TokenLoads<Shape> in = tok == it.bos ? first : LoadToken<Shape>(p, it, tok);
    SliceTokenStep<Shape>(p, it, in, tok, tok == it.bos, s);
    const int done = tok + 1 - it.bos;
    if (p.checkpoint_interval > 0 && it.pages_ok && done % p.checkpoint_interval == 0 &&
        done / p.checkpoint_interval <= it.checkpoint_count) {
      const int id =
          p.checkpoint_pages[it.seq * p.checkpoints_per_seq + done / p.checkpoint_interval - 1];
      if (id != kZeroStatePage) StoreUnitSlice<Shape>(p, it, id, tok, stage, s);
    }
  }
  if (it.pages_ok) StoreUnitSlice<Shape>(p, it, it.final_page, it.eos - 1, stage, s);
}

// ---- the kernel -------------------------------------------------------------

template <typename Shape>
__global__ void __launch_bounds__(Shape::kThreads, Shape::kMinBlocks)
    GdnRecurrentWarpSliceKernel(const RecurrentParams p, int num_units) {
  constexpr int kRows = Shape::kRows;
  extern __shared__ uint4 warp_slice_smem[];
  const int warp = threadIdx.x / 32;
  // This warp's two stages of Shape::kStageVecs vectors.
  uint4* const stages = warp_slice_smem + warp * 2 * Shape::kStageVecs;

  TriggerDependentLaunch();
  int unit = blockIdx.x * Shape::kWarps + warp;
  if (unit >= num_units) return;  // whole warps leave; no barrier follows
  const int stride = gridDim.x * Shape::kWarps;
  const ItemDivisors div = MakeItemDivisors(p);
  RecurrentItem cur =
      MakeUnit<Shape>(p, unit, LoadUnitBounds(p, UnitSeq(unit, Shape::kTilesPerHead, div)), div);
  UnitBounds next_bounds{};
  if (unit + stride < num_units) {
    next_bounds = LoadUnitBounds(p, UnitSeq(unit + stride, Shape::kTilesPerHead, div));
  }
  TokenLoads<Shape> cur_in{};
  if (cur.eos > cur.bos) cur_in = LoadToken<Shape>(p, cur, cur.bos);
  if (p.pdl) PrefetchSliceL2<Shape>(p, cur);  // a hint; the copy waits below
  GridDependencyWait();  // PDL: state pages and o only after the previous kernel
  PrefetchSlice<Shape>(p, cur, stages);
  CopyAsyncCommit();
  int stage = 0;
  for (;;) {
    const int next_unit = unit + stride;
    const bool has_next = next_unit < num_units;
    RecurrentItem next = cur;
    TokenLoads<Shape> next_in = cur_in;
    UnitBounds after_bounds = next_bounds;
    if (has_next) {
      next = MakeUnit<Shape>(p, next_unit, next_bounds, div);
      if (next_unit + stride < num_units) {
        after_bounds = LoadUnitBounds(p, UnitSeq(next_unit + stride, Shape::kTilesPerHead, div));
      }
      __syncwarp();  // every lane's reads of the other stage (two units ago) are done
      PrefetchSlice<Shape>(p, next, stages + (stage ^ 1) * Shape::kStageVecs);
      if (next.eos > next.bos) next_in = LoadToken<Shape>(p, next, next.bos);
    }
    CopyAsyncCommit();
    CopyAsyncWait<1>();  // this unit's slice has landed (this lane's copies)
    __syncwarp();        // ... and every lane's
    uint4* const here = stages + stage * Shape::kStageVecs;
    float s[kRows][Shape::kCols];
    const bool has_state = cur.initial_page >= 0 && cur.pages_ok;
    if (has_state) {
      UnpackSlice<Shape>(here, s);
      if constexpr (Shape::kQuant) {
        // The codes times scale times the first token's decay (ApplyScales).
        ApplyScales(s, reinterpret_cast<const float*>(here + Shape::kTileVecs),
                    cur.eos > cur.bos ? TokenDecay<Shape>(p, cur.head, cur_in) : 1.0f);
      }
    } else {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int c = 0; c < Shape::kCols; ++c) s[r][c] = 0.0f;
    }
    RunUnitTokens<Shape>(p, cur, cur_in, here, s);
    if (!has_next) break;
    cur = next;
    cur_in = next_in;
    next_bounds = after_bounds;
    unit = next_unit;
    stage ^= 1;
  }
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_WARP_SLICE_KERNEL_CUH_
