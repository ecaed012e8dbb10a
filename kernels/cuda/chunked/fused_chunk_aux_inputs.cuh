// The inputs of the fused kernel's aux warpgroup (fused_chunk_aux.cuh),
// formed by three otherwise idle warps of the producer warpgroup while the
// stage waits for its turn: the aux then starts a chunk on its products.
//   warp 1 (AuxGateLoop)  once the consumers release a stage (empty): the
//                         chunk's gates (raw gates loaded a chunk ahead) into
//                         the stage's gate area (FusedChunkSmem::kGates).
//   warps 2, 3 (AuxRowLoop)  once TMA filled the stage (full): thread t fixes
//                         row t of k and of q (padding zeroed, overflowing
//                         rows rescaled in place) and writes its inverse L2
//                         norms rk_t, rq_t into the gate area, then a proxy
//                         fence (the aux's and consumers' wgmma read the
//                         tiles through the async proxy).
// Each arrives on inputs_ready[stage] (65 arrivals: lane 0 of warp 1, the
// 64 row threads); the aux waits on it.
#ifndef GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_AUX_INPUTS_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_AUX_INPUTS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/gate_prefix.cuh"
#include "kernels/cuda/chunked/mma_16bit.cuh"
#include "kernels/cuda/common/mbarrier.cuh"
#include "kernels/cuda/common/tma.cuh"
#include "kernels/gating.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda::chunked {

// The gate area beyond eg, ed, rq, rk, decay (float offsets from kGates;
// FusedChunkSmem's comment): the aux's flag "Gamma factored" (an int), G,
// beta, u, and w[I - 1][j] = w_Ij (I = 1..3, j < 16 I).
inline constexpr int kAuxFactored = 257;
inline constexpr int kAuxG = 320;
inline constexpr int kAuxBeta = 384;
inline constexpr int kAuxU = 448;
inline constexpr int kAuxW = 512;
inline constexpr int kAuxGateFloats = kAuxW + 3 * 64;  // the whole gate area
inline constexpr int kAuxInputArrivals = 65;

// The raw gating inputs of tokens 2 lane, 2 lane + 1 of a chunk (value head
// h): x = direct g or fused a, y = direct beta or fused b; 0 for padding.
struct RawGates {
  float x[2], y[2];
};
__device__ __forceinline__ RawGates LoadRawGates(const ChunkArgs& args, int t0, int L, int h,
                                                 int lane) {
  const float* x = args.fused_gating ? args.a : args.g;
  const float* y = args.fused_gating ? args.b : args.beta;
  RawGates r;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int i = 2 * lane + u;
    const int64_t idx = static_cast<int64_t>(t0 + i) * args.num_v_heads + h;
    r.x[u] = i < L ? x[idx] : 0.f;
    r.y[u] = i < L ? y[idx] : 0.f;
  }
  return r;
}

// One chunk's gate area (FusedChunkSmem::kGates), by one warp: g, beta
// (v7's formulas; padding 0), G, eg, ed, decay, and the decay factors
// u_i = e^{G_i - G_16I} for row i of block I, w_Ij = e^{G_16I - G_j} for
// j < 16 I, with whether the chunk may use them (every g <= 0, so both are
// <= 1).
__device__ __forceinline__ void AuxGates(const ChunkArgs& args, const RawGates& raw, int h, int L,
                                         int lane, float* gates) {
  float* G_s = gates + kAuxG;
  float* beta_s = gates + kAuxBeta;
  float* u_s = gates + kAuxU;
  float* w_s = gates + kAuxW;
  float g[2], beta[2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int i = 2 * lane + u;
    g[u] = beta[u] = 0.f;
    if (i < L) {
      if (args.fused_gating) {
        g[u] = FusedDecay(raw.x[u], args.A_log[h], args.dt_bias[h]);
        beta[u] = FusedBeta(raw.y[u]);
      } else {
        g[u] = raw.x[u];
        beta[u] = raw.y[u];
      }
    }
  }
  const int i0 = 2 * lane, i1 = i0 + 1;
  float G0, G1, g_last;
  WarpChunkPrefix(g[0], g[1], lane, G0, G1, g_last);
  *reinterpret_cast<float2*>(G_s + i0) = make_float2(G0, G1);
  *reinterpret_cast<float2*>(beta_s + i0) = make_float2(beta[0], beta[1]);
  *reinterpret_cast<float2*>(gates + i0) =
      make_float2(i0 < L ? expf(G0) : 0.f, i1 < L ? expf(G1) : 0.f);
  *reinterpret_cast<float2*>(gates + 64 + i0) =
      make_float2(i0 < L ? expf(g_last - G0) : 0.f, i1 < L ? expf(g_last - G1) : 0.f);
  if (lane == 0) gates[256] = expf(g_last);
  // Token 16 I is lane 8 I's first.
  const float G_block = __shfl_sync(0xffffffffu, G0, lane & ~7);
  *reinterpret_cast<float2*>(u_s + i0) = make_float2(expf(G0 - G_block), expf(G1 - G_block));
#pragma unroll
  for (int I = 1; I < 4; ++I) {
    const float G_I = __shfl_sync(0xffffffffu, G0, 8 * I);
    if (i0 < 16 * I) {
      *reinterpret_cast<float2*>(w_s + 64 * (I - 1) + i0) =
          make_float2(expf(G_I - G0), expf(G_I - G1));
    }
  }
  const bool all_decay = __all_sync(0xffffffffu, g[0] <= 0.f && g[1] <= 0.f);
  if (lane == 0) reinterpret_cast<int*>(gates)[kAuxFactored] = all_decay ? 1 : 0;
}

// Zeroes row r of a raw tile (k or q; two 64-column SW128 blocks 16 KB
// apart at `row0`, 128 bytes each): a padding row.
__device__ __forceinline__ void AuxZeroRow(uint8_t* row0) {
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      reinterpret_cast<uint4*>(row0 + 16384 * b)[e] = make_uint4(0u, 0u, 0u, 0u);
    }
}

// One row of a raw tile (as AuxZeroRow): zeroed when padding, rescaled in
// place by kL2NormRescale when its sum of squares overflows (with the L2 norm
// on; TPrep's rule); returns its inverse norm (1 without the L2 norm, 0 for
// padding).
template <typename Op>
__device__ __forceinline__ float AuxFixRowAndNorm(uint8_t* row0, bool valid, bool l2_norm) {
  if (!valid) {
    AuxZeroRow(row0);
    return 0.f;
  }
  if (!l2_norm) return 1.f;
  uint4* blk[2] = {reinterpret_cast<uint4*>(row0), reinterpret_cast<uint4*>(row0 + 16384)};
  float sum = 0.f;
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const uint4 piece = blk[b][e];
      const uint32_t words[4] = {piece.x, piece.y, piece.z, piece.w};
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 x = Unpack2<Op>(words[p]);
        sum = fmaf(x.x, x.x, sum);
        sum = fmaf(x.y, x.y, sum);
      }
    }
  float eps = kL2NormEps;
  if (!isfinite(sum)) {  // max |x| >= ~2^64: keep the row times kL2NormRescale (exact)
    eps = 0.f;
    sum = 0.f;
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        uint4 piece = blk[b][e];
        uint32_t* words = reinterpret_cast<uint32_t*>(&piece);
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          const float2 x = Unpack2<Op>(words[p]);
          const float x0 = x.x * kL2NormRescale, x1 = x.y * kL2NormRescale;
          sum = fmaf(x0, x0, sum);
          sum = fmaf(x1, x1, sum);
          words[p] = Pack2<Op>(x0, x1);
        }
        blk[b][e] = piece;
      }
  }
  return 1.0f / sqrtf(sum + eps);
}

// Warp 1 of the producer warpgroup: every chunk's gate area, in the
// stage's turn (after the consumers' release, as the producer's loads).
__device__ __forceinline__ void AuxGateLoop(const ChunkArgs& args, uint8_t* smem,
                                            uint32_t gates_offset, uint32_t stage_bytes,
                                            int stages, uint64_t* empty, uint64_t* inputs_ready,
                                            int h, int seq_t0, int seq_end, int num_chunks) {
  const int lane = threadIdx.x & 31;
  RawGates raw_next{};
  if (num_chunks > 0) raw_next = LoadRawGates(args, seq_t0, min(kChunk, seq_end - seq_t0), h, lane);
  for (int cc = 0; cc < num_chunks; ++cc) {
    const int stage = cc % stages;
    const uint32_t use = cc / stages;
    const int t0 = seq_t0 + cc * kChunk;
    const RawGates raw = raw_next;
    if (cc + 1 < num_chunks) {
      raw_next = LoadRawGates(args, t0 + kChunk, min(kChunk, seq_end - t0 - kChunk), h, lane);
    }
    MbarrierWait(&empty[stage], (use & 1) ^ 1);  // use 0 passes at once
    AuxGates(args, raw, h, min(kChunk, seq_end - t0), lane,
             reinterpret_cast<float*>(smem + stage * stage_bytes + gates_offset));
    __syncwarp();
    if (lane == 0) MbarrierArrive(&inputs_ready[stage]);
  }
}

// Warps 2, 3 of the producer warpgroup (t = thread - 64): row t of each
// chunk's k and q tiles (at qk_offset in the stage: two 64-column SW128
// blocks 16 KB apart, k's 64 rows then q's), once TMA filled them.
template <typename Op, bool kWithO>
__device__ __forceinline__ void AuxRowLoop(const ChunkArgs& args, uint8_t* smem,
                                           uint32_t qk_offset, uint32_t gates_offset,
                                           uint32_t stage_bytes, int stages, uint64_t* full,
                                           uint64_t* inputs_ready, int seq_t0, int seq_end,
                                           int num_chunks) {
  const int t = threadIdx.x - 64;
  for (int cc = 0; cc < num_chunks; ++cc) {
    const int stage = cc % stages;
    const uint32_t use = cc / stages;
    const int L = min(kChunk, seq_end - seq_t0 - cc * kChunk);
    uint8_t* st = smem + stage * stage_bytes;
    float* gates = reinterpret_cast<float*>(st + gates_offset);
    MbarrierWait(&full[stage], use & 1);
    gates[192 + t] = AuxFixRowAndNorm<Op>(st + qk_offset + 128 * t, t < L, args.l2_norm_qk);
    if constexpr (kWithO) {
      gates[128 + t] =
          AuxFixRowAndNorm<Op>(st + qk_offset + 8192 + 128 * t, t < L, args.l2_norm_qk);
    }
    FenceProxyAsyncShared();
    MbarrierArrive(&inputs_ready[stage]);
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_AUX_INPUTS_CUH_
