// T = (I + A)^-1 of a chunk's strictly lower 64 x 64 matrix A, by 16 x 16
// blocks (v7's method, chunk_prep_blocked.cuh), in three parts that callers
// place between their own barriers: v7's prep (chunk_prep_blocked.cuh), TPrep
// (tprep.cuh, 8 warps) and the fused kernel's aux warpgroup
// (fused_chunk_aux.cuh, 4 warps) run them.
// A (Af) and T (Tf) are fp32 [64][kSF] in shared memory; T's strictly upper
// blocks are scratch (readers use j <= i only).
//   InvertDiagonalBlocks threads 0..63: T_dd = (I + A_dd)^-1 for the four
//                        diagonal blocks by forward substitution;
//   MergePairFirst / Second  warp p merges blocks 2p, 2p + 1 (16 -> 32);
//   InvertDiagonalPairs  both in warps 0, 1 with warp barriers only.
//   MergeHalvesFirst     warps 0..3 (warp4 = 0..3), after a barrier over the
//   MergeHalvesSecond    two above: the merge 32 -> 64 in two products, a
//                        barrier between them.
// The merges are split-bf16 tensor-core products (SplitMmaBlock).
#ifndef GDN_KERNELS_CUDA_CHUNKED_BLOCKED_INVERSE_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_BLOCKED_INVERSE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/split_products.cuh"

namespace gdn::cuda::chunked {

// Forward substitution, T_dd = (I + A_dd)^-1 for the four 16 x 16 diagonal
// blocks: t64 in 0..63 is column t64 % 16 of block t64 / 16 (x_r = 0 above
// the diagonal falls out). A's rows are read four floats at a time (kSF a
// multiple of 4: 16-byte aligned rows); the sums are the same as element
// by element (even j into s0, odd into s1).
template <int kSF>
__device__ __forceinline__ void InvertDiagonalBlocks(const float* Af, float* Tf, int t64) {
  static_assert(kSF % 4 == 0, "16-byte aligned rows");
  const int d = t64 >> 4, col = t64 & 15;
  const float* a_blk = Af + 16 * d * kSF + 16 * d;
  float x[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int j4 = 0; j4 < r; j4 += 4) {
      const float4 a4 = *reinterpret_cast<const float4*>(a_blk + r * kSF + j4);
      const float a[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = j4 + u;
        if (j >= r) break;
        if (j & 1) {
          s1 = fmaf(a[u], x[j], s1);
        } else {
          s0 = fmaf(a[u], x[j], s0);
        }
      }
    }
    x[r] = (r == col ? 1.f : 0.f) - (s0 + s1);
  }
#pragma unroll
  for (int r = 0; r < 16; ++r) Tf[(16 * d + r) * kSF + 16 * d + col] = x[r];
}

// The merge 16 -> 32 of the block pair (2 p, 2 p + 1), one warp: first Y_p =
// A_{2p+1,2p} T_{2p,2p} into the scratch block (0, 2 + p) of Tf, then
// (after a barrier over what the first wrote) T_{2p+1,2p} = -T_{2p+1,2p+1} Y_p.
template <int kSF>
__device__ __forceinline__ void MergePairFirst(const float* Af, float* Tf, int p, int lane) {
  SplitMmaBlock<kSF, 1>({Af + (32 * p + 16) * kSF + 32 * p}, {Tf + 32 * p * kSF + 32 * p},
                        Tf + 32 + 16 * p, 1.f, lane);
}
template <int kSF>
__device__ __forceinline__ void MergePairSecond(float* Tf, int p, int lane) {
  SplitMmaBlock<kSF, 1>({Tf + (32 * p + 16) * kSF + 32 * p + 16}, {Tf + 32 + 16 * p},
                        Tf + (32 * p + 16) * kSF + 32 * p, -1.f, lane);
}

// Both of the above in warps 0, 1 (t64 = thread index 0..63): warp p
// inverts blocks 2 p, 2 p + 1 and merges them; it reads only Af and what it
// wrote itself, so warp barriers suffice.
template <int kSF>
__device__ __forceinline__ void InvertDiagonalPairs(const float* Af, float* Tf, int t64) {
  InvertDiagonalBlocks<kSF>(Af, Tf, t64);
  __syncwarp();
  const int p = t64 >> 5, lane = t64 & 31;
  MergePairFirst<kSF>(Af, Tf, p, lane);
  __syncwarp();
  MergePairSecond<kSF>(Tf, p, lane);
}

// Tf[0:16, 16:32] and Tf[32:48, 48:64] are never written, Tf[0:32, 32:64] is
// scratch. The first part reads Tf[0:32, 0:32] (final after
// InvertDiagonalPairs) and writes only scratch blocks.
template <int kSF>
__device__ __forceinline__ void MergeHalvesFirst(const float* Af, float* Tf, int warp4,
                                                 int lane) {
  const int a = warp4 >> 1, b = warp4 & 1;
  const float* a_row = Af + (32 + 16 * a) * kSF;
  if (b == 0) {
    SplitMmaBlock<kSF, 2>({a_row, a_row + 16}, {Tf, Tf + 16 * kSF}, Tf + 16 * a * kSF + 32, 1.f,
                          lane);
  } else {
    SplitMmaBlock<kSF, 1>({a_row + 16}, {Tf + 16 * kSF + 16}, Tf + 16 * a * kSF + 48, 1.f,
                          lane);
  }
}

template <int kSF>
__device__ __forceinline__ void MergeHalvesSecond(float* Tf, int warp4, int lane) {
  const int a = warp4 >> 1, b = warp4 & 1;
  const float* y0 = Tf + 32 + 16 * b;  // Y_{0b}; Y_{1b} 16 rows below
  if (a == 0) {
    SplitMmaBlock<kSF, 1>({Tf + 32 * kSF + 32}, {y0}, Tf + 32 * kSF + 16 * b, -1.f, lane);
  } else {
    SplitMmaBlock<kSF, 2>({Tf + 48 * kSF + 32, Tf + 48 * kSF + 48}, {y0, y0 + 16 * kSF},
                          Tf + 48 * kSF + 16 * b, -1.f, lane);
  }
}

// One piece of T'' = T diag(beta), j <= i (fp32), as Op hi + lo: piece p =
// row i = p / 8, columns j0 = 8 (p % 8) .. + 7 -> hi, lo (eight Op values
// each). T (fp32 [64][kSF], upper blocks scratch) and beta [64] in shared
// memory. A piece wholly above the diagonal (j0 > i) is zero: T and beta are
// not read for it.
template <typename Op, int kSF>
__device__ __forceinline__ void TPiece(const float* Tf, const float* beta, int p, uint4& hi_out,
                                       uint4& lo_out) {
  const int i = p >> 3, j0 = (p & 7) * 8;
  float t[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  float be[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (j0 <= i) {
    const float4 t0v = *reinterpret_cast<const float4*>(Tf + i * kSF + j0);
    const float4 t1v = *reinterpret_cast<const float4*>(Tf + i * kSF + j0 + 4);
    const float4 b0v = *reinterpret_cast<const float4*>(beta + j0);
    const float4 b1v = *reinterpret_cast<const float4*>(beta + j0 + 4);
    t[0] = t0v.x, t[1] = t0v.y, t[2] = t0v.z, t[3] = t0v.w;
    t[4] = t1v.x, t[5] = t1v.y, t[6] = t1v.z, t[7] = t1v.w;
    be[0] = b0v.x, be[1] = b0v.y, be[2] = b0v.z, be[3] = b0v.w;
    be[4] = b1v.x, be[5] = b1v.y, be[6] = b1v.z, be[7] = b1v.w;
  }
  uint32_t hi[4], lo[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int j = j0 + 2 * e;
    const float x0 = j <= i ? t[2 * e] * be[2 * e] : 0.f;
    const float x1 = j + 1 <= i ? t[2 * e + 1] * be[2 * e + 1] : 0.f;
    hi[e] = Pack2<Op>(x0, x1);
    const float2 h = Unpack2<Op>(hi[e]);
    lo[e] = Pack2<Op>(x0 - h.x, x1 - h.y);
  }
  hi_out = make_uint4(hi[0], hi[1], hi[2], hi[3]);
  lo_out = make_uint4(lo[0], lo[1], lo[2], lo[3]);
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_BLOCKED_INVERSE_CUH_
