// The TMA loads of FusedChunkKernel (fused_chunk.cuh): thread 0 of the
// producer warpgroup fills the ring stage by stage. Per chunk, once the
// consumers released the stage ("empty"), it arms "full" with the stage's
// byte count and issues the boxes: k, q (with o) and v, two 64-column
// blocks each; in form P also TPrep's T'' hi and lo, P (with o) and the gate
// vectors eg, ed, rq, rk from the workspace (FusedChunkMaps,
// fused_chunk_tiles.cuh), and the tile's `rescaled` flag into
// stage_rescaled before the arm (the arrive releases it). With the aux
// warpgroup (kAuxPrep) only q, k and v: the rest is formed in the CTA.
#ifndef GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_LOADS_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_LOADS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/fused_chunk_tiles.cuh"
#include "kernels/cuda/common/mbarrier.cuh"
#include "kernels/cuda/common/tma.cuh"

namespace gdn::cuda::chunked {

// smem: the dynamic shared memory (1024-aligned); full, empty: the ring's
// barriers; h, hq: the value and query / key head; c_first: the sequence's
// first chunk in the chunk table; rescaled: TPrep's tile flags [cq] (form
// P only).
template <bool kWithO, bool kAuxPrep>
__device__ __forceinline__ void FusedLoadLoop(const FusedChunkMaps& maps, const ChunkArgs& args,
                                              uint8_t* smem, uint64_t* full, uint64_t* empty,
                                              int32_t* stage_rescaled,
                                              const int32_t* __restrict__ rescaled, int h, int hq,
                                              int c_first, int seq_t0, int num_chunks) {
  using Sm = FusedChunkSmem;
  const int Hv = args.num_v_heads;
  // With the aux warpgroup: q, k, v only (the aux forms the rest).
  TmaPrefetchDescriptor(&maps.q);
  TmaPrefetchDescriptor(&maps.k);
  TmaPrefetchDescriptor(&maps.v);
  if constexpr (!kAuxPrep) {
    TmaPrefetchDescriptor(&maps.t_hi);
    TmaPrefetchDescriptor(&maps.t_lo);
    TmaPrefetchDescriptor(&maps.p);
    TmaPrefetchDescriptor(&maps.eg);
    TmaPrefetchDescriptor(&maps.ed);
    TmaPrefetchDescriptor(&maps.rq);
    TmaPrefetchDescriptor(&maps.rk);
  }
  for (int cc = 0; cc < num_chunks; ++cc) {
    const int stage = cc % kFusedStages;
    const uint32_t use = cc / kFusedStages;
    // The tile's flag (TPrep's), loaded while the stage is still in use.
    const int32_t tile_rescaled =
        kAuxPrep ? 0 : rescaled[(c_first + cc) * args.num_qk_heads + hq];
    MbarrierWait(&empty[stage], (use & 1) ^ 1);  // use 0 passes at once
    uint8_t* st = smem + stage * Sm::kStageBytes;
    uint64_t* bar = &full[stage];
    const int t0 = seq_t0 + cc * kChunk;
    if constexpr (!kAuxPrep) stage_rescaled[stage] = tile_rescaled;
    MbarrierArriveExpectTx(bar, Sm::TxBytes(kWithO, kAuxPrep));
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      TmaLoad3D(st + Sm::kQk + b * 16384, &maps.k, bar, 64 * b, hq, t0);
      if constexpr (kWithO) {
        TmaLoad3D(st + Sm::kQk + b * 16384 + 8192, &maps.q, bar, 64 * b, hq, t0);
      }
      TmaLoad3D(st + Sm::kV + b * 8192, &maps.v, bar, 64 * b, h, t0);
    }
    if constexpr (!kAuxPrep) {
      const int c = c_first + cc;
      const int ch = c * Hv + h;
      const int cq = c * args.num_qk_heads + hq;
      TmaLoad2D(st + Sm::kTHi, &maps.t_hi, bar, 0, ch * 64);
      TmaLoad2D(st + Sm::kTLo, &maps.t_lo, bar, 0, ch * 64);
      if constexpr (kWithO) TmaLoad2D(st + Sm::kP, &maps.p, bar, 0, ch * 64);
      TmaLoad2D(st + Sm::kGates, &maps.eg, bar, 0, ch);
      TmaLoad2D(st + Sm::kGates + 256, &maps.ed, bar, 0, ch);
      TmaLoad2D(st + Sm::kGates + 512, &maps.rq, bar, 0, cq);
      TmaLoad2D(st + Sm::kGates + 768, &maps.rk, bar, 0, cq);
    }
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_LOADS_CUH_
