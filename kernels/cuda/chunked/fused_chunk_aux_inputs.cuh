// The inputs of the fused kernel's aux warpgroup (fused_chunk_aux.cuh),
// formed by three otherwise idle warps of the producer warpgroup while the
// stage waits for its turn: the aux then starts a chunk on its products.
//   warp 1 (AuxGateLoop)  once the consumers release a stage (empty): the
//                         chunk's gates (raw gates loaded a chunk ahead) into
//                         the stage's gate area (FusedChunkSmem::kGates).
//   warps 2, 3 (AuxRowLoop)  once TMA filled the stage (full): thread t
//                         zeroes row t of k and q when it is padding, fences
//                         the async proxy (wgmma reads the tiles through it)
//                         and arrives on inputs_ready; then (with o) it
//                         forms rq_t, q row t's inverse L2 norm (the row
//                         rescaled in place when its sum of squares
//                         overflows), and arrives on q_ready, which only the
//                         consumers wait for.
// The aux forms rk from K K^T's diagonal (AuxKNorms), so the aux's path
// holds no pass over the rows: those passes, latency-bound at 24 to 40
// registers, took ~3.5 us a chunk on the H100
// (bench/results/2026-12-06-aux-consumer-p).
// Each thread arrives on inputs_ready[stage] (96 arrivals) for its own
// writes; the aux and the consumers wait on it. (One arrival by lane 0 after
// a __syncwarp is as good by the PTX memory model, but compute-sanitizer's
// racecheck does not follow it and reported the gate warp's eg / ed writes
// against the consumers' reads: bench/results/2026-12-06-aux-fast.)
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
inline constexpr int kAuxInputArrivals = 96;
inline constexpr int kAuxQReadyArrivals = 64;

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

// Adds the squares of the 8 values in `piece` (Op pairs) to sum.
template <typename Op>
__device__ __forceinline__ float AddSquares(const uint4& piece, float sum) {
  const uint32_t words[4] = {piece.x, piece.y, piece.z, piece.w};
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const float2 x = Unpack2<Op>(words[p]);
    sum = fmaf(x.x, x.x, sum);
    sum = fmaf(x.y, x.y, sum);
  }
  return sum;
}

// Sum of squares of a row's 128 values (two 64-column SW128 blocks 16 KB
// apart at row0, 128 bytes each; the swizzle only permutes a row's 16-byte
// pieces), in two independent chains.
template <typename Op>
__device__ __forceinline__ float RowSquares(const uint8_t* row0) {
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int e = 0; e < 16; ++e) {
    const uint4 piece = *reinterpret_cast<const uint4*>(row0 + 16384 * (e >> 3) + 16 * (e & 7));
    sum[e & 1] = AddSquares<Op>(piece, sum[e & 1]);
  }
  return sum[0] + sum[1];
}

// A row (as AuxZeroRow) whose sum of squares overflowed (max |x| >=
// ~2^64): rescaled in place by kL2NormRescale (exact; TPrep's rule);
// returns the new sum.
template <typename Op>
__device__ __forceinline__ float RescaleRow(uint8_t* row0) {
  float sum = 0.f;
#pragma unroll
  for (int e = 0; e < 16; ++e) {
    uint4* at = reinterpret_cast<uint4*>(row0 + 16384 * (e >> 3) + 16 * (e & 7));
    uint4 piece = *at;
    uint32_t* words = reinterpret_cast<uint32_t*>(&piece);
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 x = Unpack2<Op>(words[p]);
      const float x0 = x.x * kL2NormRescale, x1 = x.y * kL2NormRescale;
      sum = fmaf(x0, x0, sum);
      sum = fmaf(x1, x1, sum);
      words[p] = Pack2<Op>(x0, x1);
    }
    *at = piece;
  }
  return sum;
}

// The inverse L2 norm of a row from its sum of squares, rescaling the row
// first when the sum overflowed (then without the epsilon: TPrep's rule).
template <typename Op>
__device__ __forceinline__ float InverseNormFixing(uint8_t* row0, float sum) {
  float eps = kL2NormEps;
  if (!isfinite(sum)) {
    eps = 0.f;
    sum = RescaleRow<Op>(row0);
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
    MbarrierArrive(&inputs_ready[stage]);
  }
}

// Warps 2, 3 of the producer warpgroup (t = thread - 64): row t of each
// chunk's k and q tiles (at qk_offset in the stage: two 64-column SW128
// blocks 16 KB apart, k's 64 rows then q's), once TMA filled them (see the
// top; q_ready is not touched without o).
template <typename Op, bool kWithO>
__device__ __forceinline__ void AuxRowLoop(const ChunkArgs& args, uint8_t* smem,
                                           uint32_t qk_offset, uint32_t gates_offset,
                                           uint32_t stage_bytes, int stages, uint64_t* full,
                                           uint64_t* inputs_ready, uint64_t* q_ready,
                                           int seq_t0, int seq_end, int num_chunks) {
  const int t = threadIdx.x - 64;
  for (int cc = 0; cc < num_chunks; ++cc) {
    const int stage = cc % stages;
    const uint32_t use = cc / stages;
    const int L = min(kChunk, seq_end - seq_t0 - cc * kChunk);
    uint8_t* st = smem + stage * stage_bytes;
    uint8_t* k_row = st + qk_offset + 128 * t;
    uint8_t* q_row = k_row + 8192;
    MbarrierWait(&full[stage], use & 1);
    if (t >= L) {
      AuxZeroRow(k_row);
      if constexpr (kWithO) AuxZeroRow(q_row);
    }
    FenceProxyAsyncShared();
    MbarrierArrive(&inputs_ready[stage]);
    if constexpr (kWithO) {
      // rq: 0 for padding rows, 1 without the L2 norm.
      float rq = 0.f;
      if (t < L) {
        rq = args.l2_norm_qk ? InverseNormFixing<Op>(q_row, RowSquares<Op>(q_row)) : 1.f;
      }
      reinterpret_cast<float*>(st + gates_offset)[128 + t] = rq;
      FenceProxyAsyncShared();  // a rescaled row
      MbarrierArrive(&q_ready[stage]);
    }
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_AUX_INPUTS_CUH_
