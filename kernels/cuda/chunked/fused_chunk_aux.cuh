// The aux warpgroup of FusedChunkKernel (fused_chunk.cuh, kAuxPrep; v8
// chunked prefill, bench/prefill/HOPPER_DESIGN.md §4.3 and §5 step 3): what
// TPrep (tprep.cuh) writes to the workspace, formed in shared memory one
// chunk ahead of the consumers instead. The aux forms rk and T = (I + A)^-1
// (fp32, its scratch Tf), from the stage's raw k (TMA) and the gates and
// zeroed padding rows that producer warps formed
// (fused_chunk_aux_inputs.cuh). The consumers form P (IssuePHalf /
// StorePHalf) and T'' = T diag(beta) in Op hi + lo (StoreTPieces)
// themselves: the aux was the step's critical path with the consumers
// waiting on it (bench/results/2026-12-06-aux-consumer-p). Nothing per
// chunk goes through global memory, and there is no TPrep launch.
//
// Per chunk (128 threads; a = thread - 384, warp aw = a / 32 owns rows
// 16 aw .. 16 aw + 15 of every m64 product; stage s):
//   1. wait full[s] and inputs_ready[s]; kk = K K^T (SS wgmma m64n64 x 8);
//      rk from its diagonal (AuxKNorms; a row whose sum of squares
//      overflowed is rescaled and kk formed again).
//   2. A = strictly_lower(beta_i Gamma_ij rk_i rk_j kk_ij) into Af; once
//      the consumers released Tf (tf_free), each warp inverts its own
//      diagonal 16 x 16 block of A (its rows and columns are its own
//      accumulators: warp barriers only).
//   3. barrier; warps 0, 1 merge the inverse 16 -> 32 (MergePair*).
//   4. barrier; the merge 32 -> 64 (MergeHalvesFirst / Second, a barrier
//      between), and every aux thread arrives on aux_ready[s].
// Gamma_ij = e^{G_i - G_j}: below the diagonal blocks (block row I > block
// column J) as u_i w_Ij, u_i = e^{G_i - G_16I}, w_Ij = e^{G_16I - G_j},
// both <= 1 when every g <= 0 (the server's rule; a chunk with some g > 0
// takes e^{G_i - G_j} everywhere): 64 + 96 exponentials for the blocks
// below the diagonal blocks instead of 2 x 1536 (the diagonal blocks keep
// theirs, ~1,000 for A and P together). The arithmetic is otherwise
// TPrep's, except the sum orders of the wgmma products and the norms.
// Named barrier 4 over the aux warpgroup, four per chunk: the first (after
// kk, with rk) keeps a warp's diagonal inverse of chunk c + 1 from
// overwriting Tf while another warp still reads chunk c's T in step 4.
#ifndef GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_AUX_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_AUX_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/blocked_inverse.cuh"
#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/fused_chunk_aux_inputs.cuh"
#include "kernels/cuda/chunked/fused_chunk_tiles.cuh"
#include "kernels/cuda/chunked/mma_16bit.cuh"
#include "kernels/cuda/common/mbarrier.cuh"
#include "kernels/cuda/common/tma.cuh"
#include "kernels/cuda/common/wgmma.cuh"

namespace gdn::cuda::chunked {

// Aux scratch after the o staging tiles (FusedChunkSmem::kAux): Af, Tf fp32
// [64][kAuxStride] (v7's stride: float2 fragment reads in distinct banks).
inline constexpr int kAuxStride = 72;
struct FusedAuxSmem {
  static constexpr uint32_t kAf = 0;
  static constexpr uint32_t kTf = 64 * kAuxStride * 4;
  static constexpr uint32_t kBytes = 2 * 64 * kAuxStride * 4;
};
static_assert(FusedChunkSmem::kAuxBytes == FusedChunkSmem::kAux + FusedAuxSmem::kBytes + 1024,
              "FusedChunkSmem::kAuxBytes counts the aux scratch");
static_assert(FusedChunkSmem::kGates + 4 * kAuxGateFloats <= FusedChunkSmem::kStageBytes,
              "the aux's gate area fits its stage");

__device__ __forceinline__ void AuxBarrier() { asm volatile("bar.sync 4, 128;\n" ::: "memory"); }
// AuxBarrier that also returns whether `pred` held in any aux thread.
__device__ __forceinline__ bool AuxBarrierAny(bool pred) {
  uint32_t any;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 q, %1, 0;\n bar.red.or.pred p, 4, 128, q;\n"
      " selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(any)
      : "r"(pred ? 1u : 0u)
      : "memory");
  return any != 0;
}

// rk from kk = K K^T's diagonal: the thread of each quad (g, q) with
// q = g / 2 holds kk_ii of its rows i = 16 w + g (element 8 w + g % 2) and
// i + 8 (element 8 w + 6 + g % 2) and writes rk_i to rk_s: 0 for padding
// rows (i >= L, zeroed), 1 without the L2 norm, 1 / sqrt(kk_ii + eps)
// else. A row whose kk_ii is not finite (its sum of squares overflowed)
// gets -1, and the function returns true: AuxFixOverflowRows rescales it.
// kk_ii sums the row's exact squares (16-bit products in fp32) in the
// tensor core's order, not TPrep's.
__device__ __forceinline__ bool AuxKNorms(const float (&kk)[32], int w, int lane, int L,
                                          bool l2_norm, float* rk_s) {
  // Selects, not branches: with an early return and per-row branches the
  // overflow flag lived in local memory, and ncu put ~6% of the aux's
  // samples on its reload (H100); the step time did not move measurably
  // (bench/results/2026-12-06-aux-consumer-p, call 9).
  const int g = lane >> 2, q = lane & 3;
  const bool owner = q == (g >> 1);
  bool overflow = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = 16 * w + g + 8 * h;
    float d = 0.f;
#pragma unroll
    for (int ww = 0; ww < 4; ++ww) {  // constant register indices
      if (w == ww) d = (g & 1) ? kk[8 * ww + 6 * h + 1] : kk[8 * ww + 6 * h];
    }
    const bool valid = i < L, finite = isfinite(d);
    const float r = !valid ? 0.f : !l2_norm ? 1.f : finite ? 1.0f / sqrtf(d + kL2NormEps) : -1.f;
    if (owner) rk_s[i] = r;
    overflow = overflow || (owner && valid && l2_norm && !finite);
  }
  return overflow;
}

// The slow path of AuxKNorms (a k row with max |x| >= ~2^64; every aux
// thread, after the barrier that found it): row i with rk_i = -1 is
// rescaled in place (TPrep's rule, RescaleRow) by thread i and gets its
// inverse norm without the epsilon; then a proxy fence and a barrier (kk
// must be formed again from the rescaled rows).
template <typename Op>
__device__ __forceinline__ void AuxFixOverflowRows(uint8_t* k_tile, float* rk_s, int a) {
  if (a < kChunk && rk_s[a] < 0.f) {
    rk_s[a] = 1.0f / sqrtf(RescaleRow<Op>(k_tile + 128 * a));
  }
  FenceProxyAsyncShared();
  AuxBarrier();
}

// Byte offset of the 16-byte piece `chunk16` of row `row` in a 64-column
// SW128 tile: Sw128TileOffset (wgmma.cuh) in int arithmetic, which kept the
// aux at 96 bytes of spills (the unsigned form: 120, and twice the reloads
// in its loop).
__device__ __forceinline__ uint32_t Sw128Piece(int row, int chunk16) {
  return row * 128 + ((chunk16 ^ (row & 7)) << 4);
}

// For each element (i, j) of a 64 x (8 kTiles) block of a 64 x 64 product
// held from accumulator element 0 on (warp w: rows i = 16 w + g + 8 h;
// n-tile lt: columns j = 8 (nt0 + lt) + 2 q, + 1), in pairs (j, j + 1):
// out(i, j, v0, v1) with v = row_i col_j Gamma_ij acc_ij where j < i
// (kStrict) or j <= i, else 0, for the column blocks at or below the
// diagonal block; and with kAbove, zero pairs for those above it too.
// row_i: this thread's two rows' factors (scale rq_i, or beta_i rk_i),
// col_j = rk[j]; Gamma as the top of this file says: u_i w_Ij below the
// diagonal blocks when `factored`.
template <bool kStrict, bool kAbove, int kTiles, typename Out>
__device__ __forceinline__ void ScaledLowerProduct(const float (&acc)[4 * kTiles], int nt0, int w,
                                                   int lane, const float (&row_i)[2],
                                                   const float* rk, const float* G_s,
                                                   const float* u_s, const float* w_s,
                                                   bool factored, Out out) {
  const int g = lane >> 2, q = lane & 3;
  float row_u[2], G_i[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = 16 * w + g + 8 * h;
    row_u[h] = row_i[h] * u_s[i];
    G_i[h] = G_s[i];
  }
#pragma unroll
  for (int lt = 0; lt < kTiles; ++lt) {
    const int nt = nt0 + lt;
    const int j0 = 8 * nt + 2 * q;
    if (nt > 2 * w + 1) {  // above the diagonal block
      if constexpr (kAbove) {
#pragma unroll
        for (int h = 0; h < 2; ++h) out(16 * w + g + 8 * h, j0, 0.f, 0.f);
      }
      continue;
    }
    const float2 c = *reinterpret_cast<const float2*>(rk + j0);
    if (nt < 2 * w && factored) {  // below: Gamma = u_i w_Ij (w >= 1 here)
      const float2 wj = *reinterpret_cast<const float2*>(w_s + 64 * (w - 1) + j0);
      const float c0 = c.x * wj.x, c1 = c.y * wj.y;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int e = 4 * lt + 2 * h;
        out(16 * w + g + 8 * h, j0, row_u[h] * (acc[e] * c0), row_u[h] * (acc[e + 1] * c1));
      }
      continue;
    }
    const float2 G_j = *reinterpret_cast<const float2*>(G_s + j0);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = 16 * w + g + 8 * h, e = 4 * lt + 2 * h;
      const bool in0 = kStrict ? j0 < i : j0 <= i, in1 = kStrict ? j0 + 1 < i : j0 + 1 <= i;
      const float v0 = in0 ? row_i[h] * expf(G_i[h] - G_j.x) * (acc[e] * c.x) : 0.f;
      const float v1 = in1 ? row_i[h] * expf(G_i[h] - G_j.y) * (acc[e + 1] * c.y) : 0.f;
      out(i, j0, v0, v1);
    }
  }
}

// kk = K K^T (SS wgmma m64n64 x 8 k-steps, committed, not waited for) of
// the stage's raw k tile in `qk_tile` (two 64-column SW128 blocks 16 KB
// apart, k's 64 rows then q's in each).
template <typename Op>
__device__ __forceinline__ void IssueKKt(float (&kk)[32], uint32_t qk_tile) {
  WgmmaFence();
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    const uint32_t blk = qk_tile + (ks / 4) * 16384;
    WgmmaSs<Op, 64, 0>(kk, DescKMajor(blk, ks % 4), DescKMajor(blk, ks % 4), ks > 0);
  }
  WgmmaCommitGroup();
}

// P = scale Gamma_ij rq_i rk_j qk_ij (j <= i, else 0), formed by the
// consumers (FusedChunkKernel with kAuxPrep, kWithO): consumer warpgroup w
// owns P's columns j in [32 w, 32 w + 32). IssuePHalf issues its Q K^T
// block (SS wgmma m64n32 x 8: A = the q rows, B = k rows 32 w .. of the
// stage's qk tile) as a group of its own; StorePHalf waits for it and
// writes it scaled into the stage's P tile (SW128, Op) from the gate area's
// rq, rk, G, u, w, then fences the async proxy. The P tile's readers (wgmma)
// wait on named barrier 3 (both consumer warpgroups).
template <typename Op>
__device__ __forceinline__ void IssuePHalf(float (&pc)[16], uint32_t qk_tile, int w) {
  WgmmaFenceOperands(pc);
  WgmmaFence();
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    const uint32_t blk = qk_tile + (ks / 4) * 16384;
    WgmmaSs<Op, 32, 0>(pc, DescKMajor(blk + 8192, ks % 4), DescKMajor(blk + 4096 * w, ks % 4),
                       ks > 0);
  }
  WgmmaCommitGroup();
}
template <typename Op>
__device__ __forceinline__ void StorePHalf(float (&pc)[16], int w, int warp, int lane,
                                           uint8_t* p_tile, const float* gates, float scale) {
  WgmmaWaitGroup<0>();
  WgmmaFenceOperands(pc);
  const float* rq = gates + 128;
  float row_i[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) row_i[hh] = scale * rq[16 * warp + (lane >> 2) + 8 * hh];
  const bool factored = reinterpret_cast<const int*>(gates)[kAuxFactored] != 0;
  ScaledLowerProduct</*kStrict=*/false, /*kAbove=*/true, 4>(
      pc, 4 * w, warp, lane, row_i, gates + 192, gates + kAuxG, gates + kAuxU, gates + kAuxW,
      factored, [&](int i, int j0, float v0, float v1) {
        *reinterpret_cast<uint32_t*>(p_tile + Sw128Piece(i, j0 >> 3) + (j0 & 7) * 2) =
            Pack2<Op>(v0, v1);
      });
  FenceProxyAsyncShared();
}

// The aux warpgroup's loop over the CTA's chunks (see the top). smem: the
// dynamic shared memory (1024-aligned); aux: its scratch; full,
// inputs_ready, aux_ready: the ring's barriers.
template <typename Op, uint32_t kQk, uint32_t kGates, uint32_t kStageBytes, int kStages>
__device__ __forceinline__ void AuxPrepLoop(const ChunkArgs& args, uint8_t* smem, uint8_t* aux,
                                            uint64_t* full, uint64_t* inputs_ready,
                                            uint64_t* aux_ready, uint64_t* tf_free,
                                            int seq_t0, int seq_end, int num_chunks) {
  constexpr int kSF = kAuxStride;
  const int a = threadIdx.x & 127, aw = a >> 5, lane = a & 31;
  float* Af = reinterpret_cast<float*>(aux + FusedAuxSmem::kAf);
  float* Tf = reinterpret_cast<float*>(aux + FusedAuxSmem::kTf);
  const uint32_t base = SharedAddress32(smem);
  for (int cc = 0; cc < num_chunks; ++cc) {
    const int stage = cc % kStages;
    const uint32_t use = cc / kStages;
    uint8_t* st = smem + stage * kStageBytes;
    const uint32_t sa = base + stage * kStageBytes;
    const float* gates = reinterpret_cast<const float*>(st + kGates);
    float* rk = const_cast<float*>(gates) + 192;  // written here (AuxKNorms)
    const int L = min(kChunk, seq_end - seq_t0 - cc * kChunk);
    const float* G_s = gates + kAuxG;
    const float* beta_s = gates + kAuxBeta;
    const float* u_s = gates + kAuxU;
    const float* w_s = gates + kAuxW;

    // 1. kk, once the stage's tiles and inputs are there.
    MbarrierWait(&full[stage], use & 1);
    MbarrierWait(&inputs_ready[stage], use & 1);
    const bool factored = reinterpret_cast<const int*>(gates)[kAuxFactored] != 0;
    float kk[32];
    IssueKKt<Op>(kk, sa + kQk);
    WgmmaWaitGroup<0>();
    WgmmaFenceOperands(kk);
    // rk for step 2 and the consumers; the barrier also says every warp is
    // done with the last chunk's Tf.
    const bool overflow = AuxKNorms(kk, aw, lane, L, args.l2_norm_qk, rk);
    if (AuxBarrierAny(overflow)) {
      AuxFixOverflowRows<Op>(st + kQk, rk, a);
      IssueKKt<Op>(kk, sa + kQk);
      WgmmaWaitGroup<0>();
      WgmmaFenceOperands(kk);
    }

    // 2. A (fp32) into Af; each warp inverts its own diagonal block of A.
    {
      float row_i[2];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int i = 16 * aw + (lane >> 2) + 8 * hh;
        row_i[hh] = beta_s[i] * rk[i];
      }
      ScaledLowerProduct</*kStrict=*/true, /*kAbove=*/false, 8>(
          kk, 0, aw, lane, row_i, rk, G_s, u_s, w_s, factored, [&](int i, int j0, float v0, float v1) {
            *reinterpret_cast<float2*>(Af + i * kSF + j0) = make_float2(v0, v1);
          });
    }
    __syncwarp();
    // The consumers have read the last chunk's T (StoreTPieces).
    if (cc > 0) MbarrierWait(tf_free, (cc - 1) & 1);
    if (lane < 16) InvertDiagonalBlocks<kSF>(Af, Tf, 16 * aw + lane);
    AuxBarrier();

    // 3. the merge 16 -> 32 (warps 0, 1).
    if (aw < 2) {
      MergePairFirst<kSF>(Af, Tf, aw, lane);
      __syncwarp();
      MergePairSecond<kSF>(Tf, aw, lane);
    }
    AuxBarrier();

    // 4. the merge 32 -> 64; T is final in Tf (the consumers form T''
    // from it, and release Tf on tf_free).
    MergeHalvesFirst<kSF>(Af, Tf, aw, lane);
    AuxBarrier();
    MergeHalvesSecond<kSF>(Tf, aw, lane);
    MbarrierArrive(&aux_ready[stage]);
  }
}

// The consumers' part of T'' = T diag(beta) in Op hi + lo (FusedChunkKernel
// with kAuxPrep): consumer thread c256 (0..255) forms pieces c256 and
// c256 + 256 (TPiece: row p / 8, columns 8 (p % 8) ..) from the aux's Tf
// and the chunk's beta into the stage's t_hi, t_lo tiles (SW128). Moved
// here from the aux, which was the step's critical path, with the
// consumers waiting ~27% of their time. Then the thread releases the aux's
// Tf (arrives on tf_free) and fences the async proxy; the tiles' readers
// (wgmma) wait on named barrier 3.
template <typename Op>
__device__ __forceinline__ void StoreTPieces(const float* Tf, const float* beta, uint8_t* t_hi,
                                             uint8_t* t_lo, int c256, uint64_t* tf_free) {
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const int p = c256 + 256 * m;
    uint4 hi, lo;
    TPiece<Op, kAuxStride>(Tf, beta, p, hi, lo);
    const uint32_t at = Sw128Piece(p >> 3, p & 7);
    *reinterpret_cast<uint4*>(t_hi + at) = hi;
    *reinterpret_cast<uint4*>(t_lo + at) = lo;
  }
  MbarrierArrive(tf_free);
  FenceProxyAsyncShared();
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_AUX_CUH_
