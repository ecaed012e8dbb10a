// The aux warpgroup of FusedChunkKernel (fused_chunk.cuh, kAuxPrep; v8
// chunked prefill, bench/prefill/HOPPER_DESIGN.md §4.3 and §5 step 3): what
// TPrep (tprep.cuh) writes to the workspace, formed in shared memory one
// chunk ahead of the consumers instead: T'' = T diag(beta) in Op hi + lo and
// P, into the ring stage that the producer's TMA filled with the chunk's raw
// q, k, v, and whose gates, fixed rows and row norms three producer warps
// formed (fused_chunk_aux_inputs.cuh). Nothing per chunk goes through global
// memory, and there is no TPrep launch.
//
// Per chunk (128 threads; a = thread - 384, warp aw = a / 32 owns rows
// 16 aw .. 16 aw + 15 of every m64 product; stage s):
//   1. wait full[s] and inputs_ready[s]; kk = K K^T (SS wgmma m64n64 x 8).
//   2. A = strictly_lower(beta_i Gamma_ij rk_i rk_j kk_ij) into Af; qk =
//      Q K^T issued; each warp inverts its own diagonal 16 x 16 block of A
//      under it (its rows and columns are its own accumulators: warp
//      barriers only).
//   3. barrier; warps 0, 1 merge the inverse 16 -> 32 (MergePair*); P =
//      scale Gamma_ij rq_i rk_j qk_ij (j <= i) into the stage's P tile
//      (SW128, the TMA image TPrep's tile had).
//   4. barrier; the merge 32 -> 64 (MergeHalvesFirst / Second, a barrier
//      between and after), T'' pieces (TPiece) into the stage's t_hi, t_lo
//      tiles (SW128), a proxy fence (the consumers' wgmma read them through
//      the async proxy), and every aux thread arrives on aux_ready[s].
// Gamma_ij = e^{G_i - G_j}: below the diagonal blocks (block row I > block
// column J) as u_i w_Ij, u_i = e^{G_i - G_16I}, w_Ij = e^{G_16I - G_j},
// both <= 1 when every g <= 0 (the server's rule; a chunk with some g > 0
// takes e^{G_i - G_j} everywhere): 64 + 96 exponentials for the blocks
// below the diagonal blocks instead of 2 x 1536 (the diagonal blocks keep
// theirs, ~1,000 for A and P together). The arithmetic is otherwise TPrep's, except the sum orders of
// the wgmma products and the norms.
// Named barrier 4 over the aux warpgroup, five per chunk: the first (after
// kk) keeps a warp's diagonal inverse of chunk c + 1 from overwriting Tf
// while another warp still reads chunk c's T in step 4.
// The state-only form (kWithO false: no q loaded) skips qk and P.
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

// Byte offset of the 16-byte piece `chunk16` of row `row` in a 64-column
// SW128 tile: Sw128TileOffset (wgmma.cuh) in int arithmetic, which kept the
// aux at 96 bytes of spills (the unsigned form: 120, and twice the reloads
// in its loop).
__device__ __forceinline__ uint32_t Sw128Piece(int row, int chunk16) {
  return row * 128 + ((chunk16 ^ (row & 7)) << 4);
}

// For each element (i, j) of the 64 x 64 product held from accumulator
// element 0 on (warp w: rows i = 16 w + g + 8 h), in pairs (j, j + 1):
// out(i, j, v0, v1) with v = row_i col_j Gamma_ij acc_ij where j < i
// (kStrict) or j <= i, else 0, for the column blocks at or below the
// diagonal block; and with kAbove, zero pairs for those above it too.
// row_i: this thread's two rows' factors (scale rq_i, or beta_i rk_i),
// col_j = rk[j]; Gamma as the top of this file says: u_i w_Ij below the
// diagonal blocks when `factored`.
template <bool kStrict, bool kAbove, typename Out>
__device__ __forceinline__ void ScaledLowerProduct(const float (&acc)[32], int w, int lane,
                                                   const float (&row_i)[2], const float* rk,
                                                   const float* G_s, const float* u_s,
                                                   const float* w_s, bool factored, Out out) {
  const int g = lane >> 2, q = lane & 3;
  float row_u[2], G_i[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = 16 * w + g + 8 * h;
    row_u[h] = row_i[h] * u_s[i];
    G_i[h] = G_s[i];
  }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
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
        const int e = 4 * nt + 2 * h;
        out(16 * w + g + 8 * h, j0, row_u[h] * (acc[e] * c0), row_u[h] * (acc[e + 1] * c1));
      }
      continue;
    }
    const float2 G_j = *reinterpret_cast<const float2*>(G_s + j0);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = 16 * w + g + 8 * h, e = 4 * nt + 2 * h;
      const bool in0 = kStrict ? j0 < i : j0 <= i, in1 = kStrict ? j0 + 1 < i : j0 + 1 <= i;
      const float v0 = in0 ? row_i[h] * expf(G_i[h] - G_j.x) * (acc[e] * c.x) : 0.f;
      const float v1 = in1 ? row_i[h] * expf(G_i[h] - G_j.y) * (acc[e + 1] * c.y) : 0.f;
      out(i, j0, v0, v1);
    }
  }
}

// acc = X Y^T (SS wgmma m64n64 x 8 k-steps, committed, not waited for) of
// the stage's raw k or q tiles at `qk_tile` (two 64-column SW128 blocks
// 16 KB apart, k's 64 rows then q's in each).
template <typename Op>
__device__ __forceinline__ void IssueAuxProduct(float (&acc)[32], uint32_t qk_tile, bool a_is_q,
                                                bool b_is_q) {
  WgmmaFence();
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    const uint32_t blk = qk_tile + (ks / 4) * 16384;
    WgmmaSs<Op, 64, 0>(acc, DescKMajor(blk + (a_is_q ? 8192 : 0), ks % 4),
                       DescKMajor(blk + (b_is_q ? 8192 : 0), ks % 4), ks > 0);
  }
  WgmmaCommitGroup();
}

// Step 3's P = scale Gamma_ij rq_i rk_j qk_ij (j <= i, else 0) from qk into
// the stage's P tile (SW128, Op); rq and rk from the stage's gate area.
template <typename Op, uint32_t kP>
__device__ __forceinline__ void AuxP(const float (&qk)[32], int w, int lane, uint8_t* st,
                                     const float* rq, const float* rk, const float* G_s,
                                     const float* u_s, const float* w_s, bool factored,
                                     float scale) {
  float row_i[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) row_i[hh] = scale * rq[16 * w + (lane >> 2) + 8 * hh];
  uint8_t* p_tile = st + kP;
  ScaledLowerProduct</*kStrict=*/false, /*kAbove=*/true>(
      qk, w, lane, row_i, rk, G_s, u_s, w_s, factored, [&](int i, int j0, float v0, float v1) {
        *reinterpret_cast<uint32_t*>(p_tile + Sw128Piece(i, j0 >> 3) + (j0 & 7) * 2) =
            Pack2<Op>(v0, v1);
      });
}

// The aux warpgroup's loop over the CTA's chunks (see the top). smem: the
// dynamic shared memory (1024-aligned); aux: its scratch; full,
// inputs_ready, aux_ready: the ring's barriers.
template <typename Op, bool kWithO, uint32_t kQk, uint32_t kTHi, uint32_t kTLo, uint32_t kP,
          uint32_t kGates, uint32_t kStageBytes, int kStages>
__device__ __forceinline__ void AuxPrepLoop(const ChunkArgs& args, uint8_t* smem, uint8_t* aux,
                                            uint64_t* full, uint64_t* inputs_ready,
                                            uint64_t* aux_ready, int num_chunks) {
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
    const float* rq = gates + 128;
    const float* rk = gates + 192;
    const float* G_s = gates + kAuxG;
    const float* beta_s = gates + kAuxBeta;
    const float* u_s = gates + kAuxU;
    const float* w_s = gates + kAuxW;

    // 1. kk, once the stage's tiles and inputs are there.
    MbarrierWait(&full[stage], use & 1);
    MbarrierWait(&inputs_ready[stage], use & 1);
    const bool factored = reinterpret_cast<const int*>(gates)[kAuxFactored] != 0;
    float kk[32];
    IssueAuxProduct<Op>(kk, sa + kQk, /*a_is_q=*/false, /*b_is_q=*/false);
    WgmmaWaitGroup<0>();
    WgmmaFenceOperands(kk);
    AuxBarrier();  // every warp is done with the last chunk's Tf

    // 2. A (fp32) into Af; qk issued; each warp inverts its own diagonal
    // block of A.
    {
      float row_i[2];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int i = 16 * aw + (lane >> 2) + 8 * hh;
        row_i[hh] = beta_s[i] * rk[i];
      }
      ScaledLowerProduct</*kStrict=*/true, /*kAbove=*/false>(
          kk, aw, lane, row_i, rk, G_s, u_s, w_s, factored, [&](int i, int j0, float v0, float v1) {
            *reinterpret_cast<float2*>(Af + i * kSF + j0) = make_float2(v0, v1);
          });
    }
    float qk[kWithO ? 32 : 1];
    if constexpr (kWithO) IssueAuxProduct<Op>(qk, sa + kQk, /*a_is_q=*/true, /*b_is_q=*/false);
    __syncwarp();
    if (lane < 16) InvertDiagonalBlocks<kSF>(Af, Tf, 16 * aw + lane);
    AuxBarrier();

    // 3. the merge 16 -> 32 (warps 0, 1); P.
    if (aw < 2) {
      MergePairFirst<kSF>(Af, Tf, aw, lane);
      __syncwarp();
      MergePairSecond<kSF>(Tf, aw, lane);
    }
    if constexpr (kWithO) {
      WgmmaWaitGroup<0>();
      WgmmaFenceOperands(qk);
      AuxP<Op, kP>(qk, aw, lane, st, rq, rk, G_s, u_s, w_s, factored, args.scale);
    }
    AuxBarrier();

    // 4. the merge 32 -> 64, then T'' (hi, lo) into the stage's tiles.
    MergeHalvesFirst<kSF>(Af, Tf, aw, lane);
    AuxBarrier();
    MergeHalvesSecond<kSF>(Tf, aw, lane);
    AuxBarrier();
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      int p = a + 128 * m;
      // Formed here each chunk: hoisted out of the loop, the four pieces'
      // offsets were spilled and their reloads stalled the step.
      asm volatile("" : "+r"(p));
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
