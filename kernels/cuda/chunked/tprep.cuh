// TPrep (v8 chunked prefill, bench/prefill/HOPPER_DESIGN.md §4.7 step 2,
// §5 step 1): v7's kernel 1 (chunk_prep_blocked.cuh) cut down to steps 0-2,
// storing what the fused kernel's form P reads (tprep_args.h): T'' = T
// diag(beta) in two Op parts, P, G, exp(G), exp(G_last - G), exp(G_last), rq,
// rk. No v, no W / U / qg / kdt.
//
// One block of 8 warps per (global chunk, q/k head), looping over the
// G = Hv / Hqk value heads of that q/k head (kk = k k^T and qk = q k^T are
// per q/k head and stay in registers across the value heads):
//   phase 1  raw q, k -> qb, kb (Op, exact for bf16 / fp16 inputs; a row
//            whose sum of squares overflows is kept times kL2NormRescale),
//            inverse norms rq, rk (-> workspace, 0 for padding);
//            kk, qk on tensor cores (ldmatrix + mma.sync), normalised in fp32.
//   per value head h:
//   step 0   (warp 0) gating (direct g, beta, or fused Qwen3-Next: g =
//            -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b); padding
//            g = beta = 0) from raw gates copied in (cp.async) one head ahead,
//            prefix sum G -> g_cum, eg, ed, decay;
//   step 1   A = strictly_lower(beta_i Gamma_ij kk_ij) (fp32, shared) and
//            P = scale Gamma_ij qk_ij, j <= i (Op, staged);
//   step 2   T = (I + A)^-1 by blocks, as v7: the four 16 x 16 diagonal blocks
//            by forward substitution and the merge 16 -> 32 (warps 0-1, one
//            pair of blocks each) while warps 2-7 copy P out, then the merge
//            32 -> 64 (warps 0-3), as split-bf16 tensor-core products
//            (SplitMmaBlock, split_products.cuh);
//   step 3   T'' = T diag(beta) in fp32, split into Op hi + lo -> t_hi, t_lo
//            (rows 0-31 by warps 4-7 during the merge 32 -> 64, rows 32-63
//            by all warps after it).
// The arithmetic of phase 1 and steps 0-2 is v7's, in the same order (the
// kk / qk products and the gate prefix sum are the same functions,
// KkQkWarpTile and WarpChunkPrefix; the rest is a copy, as v7's kernel is one
// function laid out for its own shared memory). The differences: eg / ed / rq / rk
// are written with 0 for padding tokens, T is stored as T diag(beta) in two
// parts instead of applied, and what makes it faster (the kernel is bound by
// latency and barriers, not bandwidth):
// - occupancy: Af / Tf / the stage overlay kb / qb in shared memory, phase 1
//   stores each 8-element piece as it arrives, and __launch_bounds__ asks
//   for three blocks per SM (80 registers, 48.6 KB; was two at 127
//   registers and 82 KB);
// - five block barriers per value head instead of nine: step 0 runs in one
//   warp from gates copied in one head ahead (the first head's during phase
//   1), G / beta are double-buffered by head parity (no barrier after step
//   3), and steps 2a-2b of a block pair stay in one warp (warp barriers);
// - the kk / qk tiles of warps 4-5 lie above the diagonal: not computed.
#ifndef GDN_KERNELS_CUDA_CHUNKED_TPREP_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_TPREP_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/blocked_inverse.cuh"
#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/mma_16bit.cuh"
#include "kernels/cuda/chunked/split_products.cuh"
#include "kernels/cuda/chunked/tprep_gates.cuh"
#include "kernels/cuda/chunked/tprep_args.h"
#include "kernels/cuda/common/vector_access.cuh"
#include "kernels/gdn_types.h"

namespace gdn::cuda::chunked {

// Threads of one TPrep block: 8 warps.
inline constexpr int kTPrepThreads = 256;
// Blocks per SM the registers are budgeted for (65,536 per SM; shared memory
// allows four): 3 gives 80 registers (ptxas -v, K = 128: 4-8 bytes of spills
// for bf16, up to 32 for fp16). Four (64 registers, 24 bytes of spills)
// measured the same on the H200 (ncu, 16/32 4 x 8192: 447.7 against 448.3
// us; bench/results/2026-12-03-route-threshold, visit 4), so three.
inline constexpr int kTPrepBlocksPerSm = 3;

// Shared memory of TPrepKernel<K, In>, in bytes. kb / qb are read only by
// phase 1 and the kk / qk products (which keep their results in registers),
// so Af / Tf / the stage overlay them (first written in step 1 of the first
// value head, after step 0's barrier):
//   [union] kb, qb [64][K+8] Op     raw k, q of the chunk (padding rows zero)
//           Af, Tf [64][72]  fp32   A; T (its strictly upper blocks are scratch)
//           stage  [64][72]  Op     P's staging
//   rk, rq [64] fp32; G, beta [2][64] fp32 (by value-head parity: step 0
//   of the next head writes one while step 3 of this head reads the other)
//   gate_raw [2][2][64] fp32 (by value-head parity; StartGateCopies)
// K = 128 and K = 64: 48,640 bytes (kb + qb 34,816 / 18,432 < 46,080), so
// shared memory allows four blocks per SM; registers set the count
// (kTPrepBlocksPerSm).
template <int K>
struct TPrepSmem {
  static constexpr int kStrideK = K + 8;
  static constexpr int kStrideF = 72;  // as v7: float2 fragment reads in distinct banks
  static constexpr int kStrideP = 72;
  static constexpr int kKb = 64 * kStrideK * 2;
  static constexpr int kF = 64 * kStrideF * 4;
  static constexpr int kStage = 64 * kStrideP * 2;
  static constexpr int kUnion = 2 * kKb > 2 * kF + kStage ? 2 * kKb : 2 * kF + kStage;
  static constexpr int kBytes = kUnion + 10 * 64 * 4;
  // rk, rq, G, beta, gate_raw follow the union: 16-byte aligned (float4
  // reads of beta in step 3).
  static_assert(kUnion % 16 == 0, "16-byte aligned vectors after the union");
};

// Copies a [64][64] tile of 16-bit elements from shared memory (row stride
// `stride`) to contiguous global memory with 16-byte accesses, threads
// [first, first + count) of the block sharing the pieces.
template <typename T>
__device__ __forceinline__ void CopyTile64ToGlobal(const T* src, int stride, T* dst, int first,
                                                   int count) {
  for (int p = threadIdx.x - first; p < 64 * 8; p += count) {
    const int r = p >> 3, c = (p & 7) * 8;
    *reinterpret_cast<uint4*>(dst + r * 64 + c) =
        *reinterpret_cast<const uint4*>(src + r * stride + c);
  }
}

// Step 3 for one piece of T'' (TPiece, blocked_inverse.cuh) into the
// contiguous [64][64] tiles hi_out, lo_out: two 16-byte stores.
template <typename Op, int kSF>
__device__ __forceinline__ void StoreTPiece(const float* Tf, const float* beta, Op* hi_out,
                                            Op* lo_out, int p) {
  const int i = p >> 3, j0 = (p & 7) * 8;
  uint4 hi, lo;
  TPiece<Op, kSF>(Tf, beta, p, hi, lo);
  *reinterpret_cast<uint4*>(hi_out + i * 64 + j0) = hi;
  *reinterpret_cast<uint4*>(lo_out + i * 64 + j0) = lo;
}

// Eight elements of a q / k row as floats (zeros for a padding row).
template <typename In>
__device__ __forceinline__ void LoadRow8(const In* p, bool valid, float x[8]) {
  if (valid) {
    Load8AsFloats(p, x);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = 0.f;
  }
}

// Eight floats -> Op, one 16-byte shared-memory store.
template <typename Op>
__device__ __forceinline__ void StoreOp8(Op* dst, const float x[8]) {
  *reinterpret_cast<uint4*>(dst) = make_uint4(Pack2<Op>(x[0], x[1]), Pack2<Op>(x[2], x[3]),
                                              Pack2<Op>(x[4], x[5]), Pack2<Op>(x[6], x[7]));
}

// Grid (num_chunks, Hqk), kTPrepThreads threads, TPrepSmem<K>::kBytes of
// dynamic shared memory. args: q, k, the gating, cu_seqlens, chunk_table
// (filled, ChunkTableKernel), num_seqs, num_qk_heads, num_v_heads,
// group_size, scale, fused_gating, l2_norm_qk; nothing else is read.
// __launch_bounds__ budgets registers for kTPrepBlocksPerSm blocks.
template <int K, typename In>
__global__ void __launch_bounds__(kTPrepThreads, kTPrepBlocksPerSm)
    TPrepKernel(const ChunkArgs args, const TPrepWorkspace ws) {
  using S = TPrepSmem<K>;
  using Op = OperandFor<In>;
  constexpr int kSK = S::kStrideK, kSF = S::kStrideF, kSP = S::kStrideP;
  static_assert(K % 32 == 0, "K: a multiple of 32");
  extern __shared__ __align__(16) unsigned char smem[];
  Op* kb = reinterpret_cast<Op*>(smem);  // kb, qb overlaid by Af, Tf, stage
  Op* qb = kb + 64 * kSK;
  float* Af = reinterpret_cast<float*>(smem);
  float* Tf = Af + 64 * kSF;
  Op* stage = reinterpret_cast<Op*>(Tf + 64 * kSF);
  float* rk_s = reinterpret_cast<float*>(smem + S::kUnion);
  float* rq_s = rk_s + 64;
  float* G_s = rq_s + 64;         // [2][64]
  float* beta_s = G_s + 2 * 64;  // [2][64]
  float* gate_raw = beta_s + 2 * 64;  // [2][2][64]

  const int c = blockIdx.x, hq = blockIdx.y;
  const int Hv = args.num_v_heads, group_size = args.group_size;
  const int n = args.chunk_table[args.num_seqs + 1 + c];
  const int seq_end = args.cu_seqlens[n + 1];
  const int t0 = args.cu_seqlens[n] + (c - args.chunk_table[n]) * kChunk;
  const int L = min(kChunk, seq_end - t0);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int group = lane >> 2, tig = lane & 3;

  const In* q = static_cast<const In*>(args.q);
  const In* k = static_cast<const In*>(args.k);
  const int64_t qk_token = static_cast<int64_t>(args.num_qk_heads) * K;

  // The first value head's gates, in flight during phase 1.
  if (warp == 0) StartGateCopies(args, t0, L, hq * group_size, lane, gate_raw);

  // ---- phase 1 (per q/k head): raw q, k -> qb, kb; inverse norms ------------
  // Warp w owns rows 8 w .. 8 w + 7; lane = 8 b + r owns row 8 w + r, elements
  // 32 m + 8 b .. + 7 for m < K / 32 (four lanes share a row). v7's arithmetic
  // (same values, same order of the sums), but each 8-element piece is stored
  // as it arrives instead of holding the row's K / 4 floats in registers; the
  // rare overflowed row (below) is read again from global memory.
  bool row_rescaled = false;  // this lane reported a rescaled row (rq or rk)
  {
    constexpr int M = K / 32;
    const int r = lane & 7, b = lane >> 3;
    const int i = warp * 8 + r;
    const bool valid = i < L;
    const In* kr = k + static_cast<int64_t>(t0 + i) * qk_token + hq * K + 8 * b;
    const In* qr = q + static_cast<int64_t>(t0 + i) * qk_token + hq * K + 8 * b;
    Op* kd = kb + i * kSK + 8 * b;
    Op* qd = qb + i * kSK + 8 * b;
    float sk = 0.f, sq = 0.f;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float kx[8], qx[8];
      LoadRow8(kr + 32 * m, valid, kx);
      LoadRow8(qr + 32 * m, valid, qx);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        sk += kx[e] * kx[e];
        sq += qx[e] * qx[e];
      }
      StoreOp8(kd + 32 * m, kx);
      StoreOp8(qd + 32 * m, qx);
    }
    sk += __shfl_xor_sync(0xffffffffu, sk, 8);
    sq += __shfl_xor_sync(0xffffffffu, sq, 8);
    sk += __shfl_xor_sync(0xffffffffu, sk, 16);
    sq += __shfl_xor_sync(0xffffffffu, sq, 16);
    // A row with max|x| >= ~2^60 overflowed its sum of squares: kept rescaled
    // by kL2NormRescale, with the inverse norm of the rescaled row (v7). The
    // whole warp reloads its rows and stores them again (unchanged where the
    // factor is 1).
    float k_eps = kL2NormEps, q_eps = kL2NormEps;
    float ck = 1.0f, cq = 1.0f;
    if (args.l2_norm_qk && __any_sync(0xffffffffu, !isfinite(sk) || !isfinite(sq))) {
      ck = isfinite(sk) ? 1.0f : kL2NormRescale;
      cq = isfinite(sq) ? 1.0f : kL2NormRescale;
      if (ck != 1.0f) k_eps = 0.0f;
      if (cq != 1.0f) q_eps = 0.0f;
      sk = sq = 0.f;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float kx[8], qx[8];
        LoadRow8(kr + 32 * m, valid, kx);
        LoadRow8(qr + 32 * m, valid, qx);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          kx[e] *= ck;
          qx[e] *= cq;
          sk += kx[e] * kx[e];
          sq += qx[e] * qx[e];
        }
        StoreOp8(kd + 32 * m, kx);
        StoreOp8(qd + 32 * m, qx);
      }
      sk += __shfl_xor_sync(0xffffffffu, sk, 8);
      sq += __shfl_xor_sync(0xffffffffu, sq, 8);
      sk += __shfl_xor_sync(0xffffffffu, sk, 16);
      sq += __shfl_xor_sync(0xffffffffu, sq, 16);
    }
    if (b == 0) {
      const float rk = args.l2_norm_qk ? 1.0f / sqrtf(sk + k_eps) : 1.0f;
      const float rq = args.l2_norm_qk ? 1.0f / sqrtf(sq + q_eps) : 1.0f;
      rk_s[i] = rk;
      rq_s[i] = rq;
      // A rescaled row's inverse norm goes out negated: the fused kernel
      // scales that row of its raw q / k tile by kL2NormRescale too
      // (tprep_args.h, fused_chunk_tiles.cuh FixTileRows).
      const int64_t tile = static_cast<int64_t>(c) * args.num_qk_heads + hq;
      ws.rk[tile * 64 + i] = valid ? (ck != 1.0f ? -rk : rk) : 0.f;
      ws.rq[tile * 64 + i] = valid ? (cq != 1.0f ? -rq : rq) : 0.f;
      row_rescaled = valid && (ck != 1.0f || cq != 1.0f);
    }
  }
  if (warp == 0) {  // step 0 of the first value head (parity 0)
    const int h = hq * group_size;
    GatePrefix(args, ws, gate_raw, h, static_cast<int64_t>(c) * Hv + h, L, lane, G_s, beta_s);
  }
  // The barrier after phase 1, reducing the tile's flag (written every call).
  const int tile_rescaled = __syncthreads_or(row_rescaled);
  if (tid == 0) {
    ws.rescaled[static_cast<int64_t>(c) * args.num_qk_heads + hq] = tile_rescaled != 0 ? 1 : 0;
  }

  // ---- kk = k k^T and qk = q k^T (per q/k head), normalised, in registers ---
  // Warp (mt, nh): rows 16 mt .., columns 32 nh .. (four 8-column n-tiles).
  const int mt = warp & 3;
  const int nh = warp >> 2;
  // The tiles of warps 4, 5 (rows < 32, columns >= 32) lie above the
  // diagonal, where step 1 only uses them times a zero decay: they stay 0.
  float kk[4][4], qk[4][4];
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) kk[nt][e] = qk[nt][e] = 0.f;
  if (!(nh == 1 && mt < 2)) KkQkWarpTile<K>(kb, qb, kSK, mt, nh, lane, kk, qk);
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = mt * 16 + group + 8 * (e >> 1);
      const int j = nh * 32 + nt * 8 + 2 * tig + (e & 1);
      kk[nt][e] *= rk_s[i] * rk_s[j];
      qk[nt][e] *= rq_s[i] * rk_s[j];
    }

  // ---- the value heads of this q/k head ---------------------------------------
  for (int rr = 0; rr < group_size; ++rr) {
    const int h = hq * group_size + rr;
    const int64_t ch = static_cast<int64_t>(c) * Hv + h;

    // G, beta of this head (by parity, see TPrepSmem).
    float* Gh = G_s + 64 * (rr & 1);
    float* bh = beta_s + 64 * (rr & 1);

    // step 0 (warp 0; the first head's ran after phase 1), then the copies
    // of the next value head's raw gates start. This barrier also ends the kk / qk
    // products' reads of kb / qb (which Af, Tf and the stage overlay) and the
    // previous head's step 3 (which read Tf and the other beta parity).
    if (warp == 0) {
      if (rr > 0) GatePrefix(args, ws, gate_raw + 128 * (rr & 1), h, ch, L, lane, Gh, bh);
      if (rr + 1 < group_size) {
        StartGateCopies(args, t0, L, h + 1, lane, gate_raw + 128 * ((rr + 1) & 1));
      }
    }
    __syncthreads();

    // step 1: A (shared, fp32) and P (staged, copied out by warps 2-7 in step
    // 2a) from kk, qk (v7's arithmetic; G_j and A in pairs: j0 is even).
    Op* p_global = reinterpret_cast<Op*>(ws.p) + ch * 64 * 64;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = mt * 16 + group + 8 * half;
        const int j0 = nh * 32 + nt * 8 + 2 * tig;
        const float Gi = Gh[i], bi = bh[i];
        const float2 Gj = *reinterpret_cast<const float2*>(Gh + j0);
        const float Gjs[2] = {Gj.x, Gj.y};
        float av[2], pv[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = j0 + e;
          // exp(G_i - G_j) <= 1 for j <= i; never evaluated above the diagonal.
          const float decay = j <= i ? expf(Gi - Gjs[e]) : 0.f;
          av[e] = j < i ? bi * decay * kk[nt][2 * half + e] : 0.f;
          pv[e] = args.scale * decay * qk[nt][2 * half + e];
        }
        *reinterpret_cast<float2*>(Af + i * kSF + j0) = make_float2(av[0], av[1]);
        StoreOpPair(stage + i * kSP + j0, pv[0], pv[1]);
      }
    }
    __syncthreads();

    // step 2a: diagonal blocks T_dd = (I + A_dd)^-1 (warps 0-1: thread =
    // column col of block d, forward substitution; warp p holds d = 2 p,
    // 2 p + 1), then step 2b: merge 16 -> 32 (v7's, see
    // chunk_prep_blocked.cuh), warp p the pair (2 p, 2 p + 1), beside P's
    // copy (warps 2-7). Warp p's 2b reads only Af and what warp p wrote (its
    // two diagonal blocks, then the scratch block Tf[0:16, 32 + 16 p ..]),
    // and neither warp reads what the other writes: warp barriers inside.
    if (warp < 2) {
      InvertDiagonalPairs<kSF>(Af, Tf, tid);
    } else {
      CopyTile64ToGlobal(stage, kSP, p_global, 64, kTPrepThreads - 64);
    }
    __syncthreads();

    // step 2c: merge 32 -> 64 (v7's, warps 0-3). Tf[0:16, 16:32] and
    // Tf[32:48, 48:64] are never written, Tf[0:32, 32:64] is scratch: step 3
    // reads j <= i only. Meanwhile warps 4-7 run step 3 on T's rows 0-31
    // (pieces 0-255, two per thread): those read Tf[0:32, 0:32] only, final
    // since the barrier above, which 2c reads but does not write.
    Op* hi_out = reinterpret_cast<Op*>(ws.t_hi) + ch * 64 * 64;
    Op* lo_out = reinterpret_cast<Op*>(ws.t_lo) + ch * 64 * 64;
    if (warp < 4) {
      MergeHalvesFirst<kSF>(Af, Tf, warp, lane);
    } else {
      StoreTPiece<Op, kSF>(Tf, bh, hi_out, lo_out, tid - 128);
    }
    __syncthreads();
    if (warp < 4) {
      MergeHalvesSecond<kSF>(Tf, warp, lane);
    } else {
      StoreTPiece<Op, kSF>(Tf, bh, hi_out, lo_out, tid);
    }
    __syncthreads();

    // step 3 on T's rows 32-63 (pieces 256-511): one per thread.
    StoreTPiece<Op, kSF>(Tf, bh, hi_out, lo_out, 256 + tid);
    // No barrier here: the next head's step 0 touches only the other G /
    // beta parity and the workspace before its own barrier, which every
    // thread reaches after this step 3.
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_TPREP_CUH_
