// The first token of the persistent kernel's next item, copied into shared
// memory with cp.async one item ahead, together with the item's state tile
// (device code).
//
// Why: in ncu's stall samples of the bf16-state persistent decode kernel
// (batch 256, Hv 32; bench/results/2026-12-03-kernels-channel/decode-profile)
// 28% of all samples sat at the block barrier after StageTokens: every warp
// waited while one warp loaded the item's q and k from L2, reduced their
// norms, and the block loaded the v tile. A decode item's inputs were read on
// its critical path; here they are in flight while the previous item
// computes, and staging them is a conversion out of shared memory.
//
// Each thread reads back exactly the bytes it copied (the tile's rule in
// recurrent_persistent_kernel.cuh), so cp.async.wait_group alone makes them
// visible to it, and the same thread copies the same bytes for every item:
//   warp 0, lane L:         q and k elements [L kPer, (L + 1) kPer)
//   warp 0, lane 0:         the gates (direct: g, beta; fused: a, b, A_log, dt_bias)
//   last warp, lane i < kVPieces: bytes [16 i, 16 i + 16) of the v tile
#ifndef GDN_KERNELS_CUDA_RECURRENT_TOKEN_PREFETCH_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_TOKEN_PREFETCH_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/cp_async.cuh"
#include "kernels/cuda/common/vector_access.cuh"
#include "kernels/cuda/recurrent_item.cuh"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/cuda/recurrent_shape.cuh"
#include "kernels/cuda/recurrent_tokens.cuh"
#include "kernels/gating.h"

namespace gdn::cuda {

// One token's inputs as they lie in global memory (raw, before conversion).
template <typename Shape>
struct FirstTokenSlot {
  using InT = typename Shape::InT;
  static constexpr int kQkBytes = Shape::kQkPerLane * static_cast<int>(sizeof(InT));
  static constexpr int kVPieces = Shape::kVTile * static_cast<int>(sizeof(InT)) / 16;
  static_assert(kQkBytes == 4 || kQkBytes == 8 || kQkBytes == 16, "a lane's q / k is one copy");
  static_assert(Shape::kVTile * sizeof(InT) % 16 == 0 && kVPieces <= 32,
                "the v tile in 16-byte pieces, one lane each");
  alignas(16) InT q[Shape::kK];
  alignas(16) InT k[Shape::kK];
  alignas(16) InT v[Shape::kVTile];
  alignas(16) float gates[4];
};

// Issues this thread's copies of `it`'s first token into `slot` (nothing
// for an item without tokens). The caller commits the group.
template <typename Shape>
__device__ __forceinline__ void PrefetchFirstToken(const RecurrentParams& p,
                                                   const RecurrentItem& it,
                                                   FirstTokenSlot<Shape>& slot) {
  using InT = typename Shape::InT;
  using Slot = FirstTokenSlot<Shape>;
  constexpr int kPer = Shape::kQkPerLane;
  if (it.eos <= it.bos) return;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t tok = it.bos;
  const int64_t gi = tok * p.num_v_heads + it.head;
  if (warp == 0) {
    const int64_t qk = (tok * p.num_qk_heads + it.qk_head) * Shape::kK + lane * kPer;
    CopyAsyncBytes<Slot::kQkBytes>(slot.q + lane * kPer, static_cast<const InT*>(p.q) + qk);
    CopyAsyncBytes<Slot::kQkBytes>(slot.k + lane * kPer, static_cast<const InT*>(p.k) + qk);
    if (lane == 0) {
      if (p.fused_gating) {
        CopyAsync4(&slot.gates[0], p.a + gi);
        CopyAsync4(&slot.gates[1], p.b + gi);
        CopyAsync4(&slot.gates[2], p.A_log + it.head);
        CopyAsync4(&slot.gates[3], p.dt_bias + it.head);
      } else {
        CopyAsync4(&slot.gates[0], p.g + gi);
        CopyAsync4(&slot.gates[1], p.beta + gi);
      }
    }
  }
  if (warp == Shape::kWarps - 1 && lane < Slot::kVPieces) {
    constexpr int kPerPiece = 16 / static_cast<int>(sizeof(InT));
    const InT* v = static_cast<const InT*>(p.v) + gi * Shape::kV + it.col0 + lane * kPerPiece;
    CopyAsync16(slot.v + lane * kPerPiece, v);
  }
}

// Stages the first token of `it` from `slot` into shared-memory slot 0
// (what StageTokens does for it). The slot's copies have landed for this
// thread (cp.async.wait_group); the caller synchronises afterwards.
template <typename Shape>
__device__ __forceinline__ void StageFirstToken(const RecurrentParams& p,
                                                RecurrentSmem<Shape>& smem,
                                                const RecurrentItem& it,
                                                const FirstTokenSlot<Shape>& slot) {
  using InT = typename Shape::InT;
  using Slot = FirstTokenSlot<Shape>;
  constexpr int kPer = Shape::kQkPerLane;
  if (it.eos <= it.bos) return;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (warp == 0) {
    float q[kPer], k[kPer];
    LoadAsFloats<InT, kPer>(slot.q + lane * kPer, q);
    LoadAsFloats<InT, kPer>(slot.k + lane * kPer, k);
    float gate_g = 0.0f, gate_beta = 0.0f;
    if (lane == 0) {
      if (p.fused_gating) {
        gate_g = FusedDecay(slot.gates[0], slot.gates[2], slot.gates[3]);
        gate_beta = FusedBeta(slot.gates[1]);
      } else {
        gate_g = slot.gates[0];
        gate_beta = slot.gates[1];
      }
    }
    StageQk<Shape>(p, smem, 0, q, k, gate_g, gate_beta);
  }
  if (warp == Shape::kWarps - 1 && lane < Slot::kVPieces) {
    constexpr int kPerPiece = 16 / static_cast<int>(sizeof(InT));
    float v[kPerPiece];
    LoadAsFloats<InT, kPerPiece>(slot.v + lane * kPerPiece, v);
#pragma unroll
    for (int i = 0; i < kPerPiece; ++i) smem.v[0][lane * kPerPiece + i] = v[i];
  }
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_TOKEN_PREFETCH_CUH_
