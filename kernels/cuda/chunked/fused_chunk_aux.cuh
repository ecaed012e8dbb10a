// The aux warpgroup of FusedChunkKernel (fused_chunk.cuh, kAuxPrep; v8
// chunked prefill, bench/prefill/HOPPER_DESIGN.md §4.3 and §5 step 3): what
// TPrep (tprep.cuh) writes to the workspace, formed in shared memory one
// chunk ahead of the consumers instead: T'' = T diag(beta) in Op hi + lo, P,
// and the gate vectors, into the ring stage that the producer's TMA filled
// with the chunk's raw q, k, v. Nothing per chunk goes through global
// memory, and there is no TPrep launch.
//
// Per chunk (128 threads; a = thread - 384, warp aw = a / 32; stage s):
//   0. (warp 0) the raw gates of this value head, loaded one chunk ahead
//      into registers: g, beta (or fused a, b: Qwen3-Next's gating), the
//      prefix sum G (WarpChunkPrefix, v7's order), and eg = e^G,
//      ed = e^{G_last - G}, decay = e^{G_last} into the stage's gate area;
//      G and beta into aux scratch (by chunk parity).
//   1. wait full[s]; thread a takes row a % 64 of k (a < 64) or q: its
//      inverse L2 norm into the gate area, the row zeroed when it is
//      padding (j >= L: the next sequence's tokens, or TMA's zero fill), and
//      rescaled in place by kL2NormRescale when its fp32 sum of squares
//      overflows (its norm then that of the rescaled row, as TPrep does).
//      So the consumers read fixed tiles (no FixTileRows) and positive norms.
//   2. kk = K K^T (SS wgmma m64n64k16 x 8 over the k tile, A = B = k) ->
//      A = strictly_lower(beta_i Gamma_ij rk_i rk_j kk_ij) (fp32, Af).
//   3. qk = Q K^T issued (SS wgmma, A = q, B = k), and under it warps 0, 1
//      invert A's diagonal blocks and merge them to 32 x 32
//      (InvertDiagonalPairs); then P = scale Gamma_ij rq_i rk_j qk_ij,
//      j <= i, into the stage's P tile (SW128, the TMA image TPrep's tile
//      had).
//   4. the merge 32 -> 64 (MergeHalvesFirst / Second), T'' pieces (TPiece)
//      into the stage's t_hi, t_lo tiles (SW128), a proxy fence (the
//      consumers' wgmma read them through the async proxy), and every aux
//      thread arrives on aux_ready[s].
// The arithmetic is TPrep's (same formulas and roundings), except the kk /
// qk products (wgmma instead of mma.sync: another summation order) and the
// norms' sum order.
// Barriers: named barrier 4 over the aux warpgroup, four per chunk. The aux
// reuses Af / Tf for the next chunk only after its barrier after step 1,
// which every aux thread reaches after its own step 4.
// The state-only form (kWithO false: no q loaded) skips q's norms, qk and P.
#ifndef GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_AUX_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_AUX_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/blocked_inverse.cuh"
#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/fused_chunk_tiles.cuh"
#include "kernels/cuda/chunked/gate_prefix.cuh"
#include "kernels/cuda/chunked/mma_16bit.cuh"
#include "kernels/cuda/common/mbarrier.cuh"
#include "kernels/cuda/common/tma.cuh"
#include "kernels/cuda/common/wgmma.cuh"
#include "kernels/gating.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda::chunked {

// Aux scratch after the o staging tiles (FusedChunkSmem::kAux): Af, Tf fp32
// [64][kAuxStride] (v7's stride: float2 fragment reads in distinct banks),
// then G and beta [2 parities][64] fp32.
inline constexpr int kAuxStride = 72;
struct FusedAuxSmem {
  static constexpr uint32_t kAf = 0;
  static constexpr uint32_t kTf = 64 * kAuxStride * 4;
  static constexpr uint32_t kG = 2 * 64 * kAuxStride * 4;
  static constexpr uint32_t kBeta = kG + 2 * 64 * 4;
  static constexpr uint32_t kBytes = kBeta + 2 * 64 * 4;
};
static_assert(FusedChunkSmem::kAuxBytes == FusedChunkSmem::kAux + FusedAuxSmem::kBytes + 1024,
              "FusedChunkSmem::kAuxBytes counts the aux scratch");

__device__ __forceinline__ void AuxBarrier() { asm volatile("bar.sync 4, 128;\n" ::: "memory"); }

// Byte offset of the 16-byte piece `chunk16` of row `row` in an SW128 tile
// of 128-byte rows (the image TMA writes with SWIZZLE_128B).
__device__ __forceinline__ uint32_t Sw128Piece(int row, int chunk16) {
  return row * 128 + ((chunk16 ^ (row & 7)) << 4);
}

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

// Step 0 (warp 0): g, beta (v7's formulas; padding 0), G, and the gate area
// of the stage: eg [64] at +0, ed [64] at +64 floats, decay at +256.
__device__ __forceinline__ void AuxGates(const ChunkArgs& args, const RawGates& raw, int h, int L,
                                         int lane, float* gates, float* G_s, float* beta_s) {
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
}

// Step 1 for one row of a raw tile (k or q; two 64-column SW128 blocks 16 KB
// apart at `row0`, 128 bytes each): zeroed when padding, rescaled when its sum
// of squares overflows (with the L2 norm on); returns its inverse norm (1
// without the L2 norm, 0 for padding).
template <typename Op>
__device__ __forceinline__ float AuxFixRowAndNorm(uint8_t* row0, bool valid, bool l2_norm) {
  uint4* blk[2] = {reinterpret_cast<uint4*>(row0), reinterpret_cast<uint4*>(row0 + 16384)};
  if (!valid) {
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
      for (int e = 0; e < 8; ++e) blk[b][e] = make_uint4(0u, 0u, 0u, 0u);
    return 0.f;
  }
  if (!l2_norm) return 1.f;
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

// The aux warpgroup's loop over the CTA's chunks (see the top). st0: the
// dynamic shared memory (1024-aligned); aux: its scratch; full / aux_ready:
// the ring's barriers. n, h, hq: sequence, value head, q/k head.
template <typename Op, bool kWithO, uint32_t kQk, uint32_t kTHi, uint32_t kTLo, uint32_t kP,
          uint32_t kGates, uint32_t kStageBytes, int kStages>
__device__ __forceinline__ void AuxPrepLoop(const ChunkArgs& args, uint8_t* smem, uint8_t* aux,
                                            uint64_t* full, uint64_t* aux_ready, int h,
                                            int seq_t0, int seq_end, int num_chunks) {
  constexpr int kSF = kAuxStride;
  const int a = threadIdx.x & 127, aw = a >> 5, lane = a & 31;
  float* Af = reinterpret_cast<float*>(aux + FusedAuxSmem::kAf);
  float* Tf = reinterpret_cast<float*>(aux + FusedAuxSmem::kTf);
  const uint32_t base = SharedAddress32(smem);
  const float scale = args.scale;

  RawGates raw_next{};
  if (aw == 0 && num_chunks > 0) {
    raw_next = LoadRawGates(args, seq_t0, min(kChunk, seq_end - seq_t0), h, lane);
  }
  for (int cc = 0; cc < num_chunks; ++cc) {
    const int stage = cc % kStages;
    const uint32_t use = cc / kStages;
    const int t0 = seq_t0 + cc * kChunk;
    const int L = min(kChunk, seq_end - t0);
    uint8_t* st = smem + stage * kStageBytes;
    const uint32_t sa = base + stage * kStageBytes;
    float* gates = reinterpret_cast<float*>(st + kGates);
    float* G_s = reinterpret_cast<float*>(aux + FusedAuxSmem::kG) + 64 * (cc & 1);
    float* beta_s = reinterpret_cast<float*>(aux + FusedAuxSmem::kBeta) + 64 * (cc & 1);

    MbarrierWait(&full[stage], use & 1);
    // 0. gates (warp 0), the next chunk's raw gates in flight meanwhile.
    if (aw == 0) {
      const RawGates raw = raw_next;
      if (cc + 1 < num_chunks) {
        raw_next = LoadRawGates(args, t0 + kChunk, min(kChunk, seq_end - t0 - kChunk), h, lane);
      }
      AuxGates(args, raw, h, L, lane, gates, G_s, beta_s);
    }
    // 1. rows: k by threads 0-63, q by 64-127 (rq at +128, rk at +192 floats).
    {
      const int r = a & 63;
      const bool is_q = a >= 64;
      if (kWithO || !is_q) {
        const float inv = AuxFixRowAndNorm<Op>(st + kQk + (is_q ? 8192 : 0) + 128 * r, r < L,
                                               args.l2_norm_qk);
        gates[(is_q ? 128 : 192) + r] = inv;
      }
    }
    FenceProxyAsyncShared();  // the fixed rows, for every wgmma that reads them
    AuxBarrier();

    // 2. kk = K K^T, then A (fp32) into Af.
    const float* rq = gates + 128;
    const float* rk = gates + 192;
    {
      float kk[32];
      WgmmaFence();
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        const uint64_t dk = DescKMajor(sa + kQk + (ks / 4) * 16384, ks % 4);
        WgmmaSs<Op, 64, 0>(kk, dk, dk, ks > 0);
      }
      WgmmaCommitGroup();
      WgmmaWaitGroup<0>();
      WgmmaFenceOperands(kk);
#pragma unroll
      for (int e = 0; e < 32; e += 2) {
        const int i = AccRow(a, e), j0 = AccCol(a, e);
        const float Gi = G_s[i], bi = beta_s[i], rki = rk[i];
        const float2 Gj = *reinterpret_cast<const float2*>(G_s + j0);
        const float2 rkj = *reinterpret_cast<const float2*>(rk + j0);
        const float Gjs[2] = {Gj.x, Gj.y}, rks[2] = {rkj.x, rkj.y};
        float av[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int j = j0 + u;
          const float decay = j <= i ? expf(Gi - Gjs[u]) : 0.f;
          av[u] = j < i ? bi * decay * (kk[e + u] * (rki * rks[u])) : 0.f;
        }
        *reinterpret_cast<float2*>(Af + i * kSF + j0) = make_float2(av[0], av[1]);
      }
    }
    AuxBarrier();

    // 3. qk issued; warps 0, 1 invert the diagonal blocks under it; P.
    if constexpr (kWithO) {
      float qk[32];
      WgmmaFence();
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        const uint32_t blk = sa + kQk + (ks / 4) * 16384;
        WgmmaSs<Op, 64, 0>(qk, DescKMajor(blk + 8192, ks % 4), DescKMajor(blk, ks % 4), ks > 0);
      }
      WgmmaCommitGroup();
      WgmmaFenceOperands(qk);
      if (aw < 2) InvertDiagonalPairs<kSF>(Af, Tf, a);
      WgmmaWaitGroup<0>();
      WgmmaFenceOperands(qk);
      uint8_t* p_tile = st + kP;
#pragma unroll
      for (int e = 0; e < 32; e += 2) {
        const int i = AccRow(a, e), j0 = AccCol(a, e);
        const float Gi = G_s[i], rqi = rq[i];
        const float2 Gj = *reinterpret_cast<const float2*>(G_s + j0);
        const float2 rkj = *reinterpret_cast<const float2*>(rk + j0);
        const float Gjs[2] = {Gj.x, Gj.y}, rks[2] = {rkj.x, rkj.y};
        float pv[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const float decay = j0 + u <= i ? expf(Gi - Gjs[u]) : 0.f;
          pv[u] = scale * decay * (qk[e + u] * (rqi * rks[u]));
        }
        *reinterpret_cast<uint32_t*>(p_tile + Sw128Piece(i, j0 >> 3) + (j0 & 7) * 2) =
            Pack2<Op>(pv[0], pv[1]);
      }
    } else {
      if (aw < 2) InvertDiagonalPairs<kSF>(Af, Tf, a);
    }
    AuxBarrier();

    // 4. the merge 32 -> 64, then T'' (hi, lo) into the stage's tiles.
    MergeHalvesFirst<kSF>(Af, Tf, aw, lane);
    AuxBarrier();
    MergeHalvesSecond<kSF>(Tf, aw, lane);
    AuxBarrier();
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int p = a + 128 * m;
      uint4 hi, lo;
      TPiece<Op, kSF>(Tf, beta_s, p, hi, lo);
      const uint32_t at = Sw128Piece(p >> 3, p & 7);
      *reinterpret_cast<uint4*>(st + kTHi + at) = hi;
      *reinterpret_cast<uint4*>(st + kTLo + at) = lo;
    }
    FenceProxyAsyncShared();
    MbarrierArrive(&aux_ready[stage]);
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_AUX_CUH_
