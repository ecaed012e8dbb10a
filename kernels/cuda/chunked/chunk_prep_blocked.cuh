// Kernel 1 of the chunked prefill: one block of 8 warps per (global chunk,
// q/k head), looping over the G = Hv / Hqk value heads of that q/k head. It
// replaced the per-value-head ChunkPrepGroupKernel (see git history and
// bench/results/2026-12-01-prefill-v3.md / -v4.md) with what Nsight Compute
// profiles asked for (H200, 16/32 1 x 32768: 26% of the older kernel's warp
// time waited at the barrier behind its two solver warps, 25% of its
// instructions built tensor-core fragments from fp32 columns; the first
// blocked form, with fp32 FMA merges and 4-byte stores, was then bound by the
// shared-memory / L1 pipe, which the tensor-core merges and staged stores
// below relieve; that form was removed in issue 22):
//   - q, k stay raw in shared memory (in the operand type Op, mma_16bit.cuh:
//     exact for bf16 and fp16 inputs; a row whose sum of squares overflows
//     is kept times kL2NormRescale, exactly) with their inverse L2 norms rq, rk
//     beside them; every tensor-core operand comes from shared memory by
//     ldmatrix (transposing where needed) and the norms are applied in fp32
//     to the products:
//       kk_ij = rk_i rk_j (k_i . k_j),  qk_ij = rq_i rk_j (q_i . k_j),
//       W = T diag(beta exp(G) rk) k,   U = T diag(beta) v;
//   - T = (I + A)^-1 by blocks on all 8 warps: the four 16 x 16 diagonal
//     blocks by forward substitution (warps 0-1, one column per thread) while
//     warps 2-7 write qg and kdt, then two merges (16 -> 32 -> 64) as
//     split-16-bit tensor-core products (SplitMmaBlock):
//       [[T0, 0], [X, T1]] with X = -T1 A10 T0 (block rows of 16, then 32).
// Per value head h:
//   step 0  v of head h -> vb (Op; cp.async when the input is Op), gating
//           (prefetched one head ahead), prefix sum G, exp(G), exp(G_last - G),
//           bw = beta exp(G) rk;
//   step 1  A = strictly_lower(beta_i exp(G_i - G_j) kk_ij) (fp32, shared) and
//           P = scale exp(G_i - G_j) qk_ij, j <= i (global) from the fragments;
//   step 2  T (above);
//   step 3  W = (T diag(bw)) k, U = (T diag(beta)) v on tensor cores, the
//           left factor in two Op parts (hi + lo, from T in fp32: ~2^-16
//           relative) -> workspace.
// Roundings: qg = Op(scale exp(G_i) (q_i rq_i)) and kdt = Op(exp(G_last
// - G_j) (k_j rk_j)) are the older kernel's fp32 operations in the same order; kk,
// qk and W use the exact q, k instead of rounded normalised copies (one
// rounding less). Inputs are bf16 or fp16 (In = Op; fp32 inputs take the
// recurrent kernel: ChunkedPrefill::Supports).
// T enters W and U unrounded (hi + lo): with bf16 T (until 2026-12-01
// session 6, as flash-linear-attention rounds it) rows of nearly equal
// tokens, whose W and U rows are small differences of O(1) terms, carried
// the terms' rounding (max error 1.0e-2 on all-equal tokens).
#ifndef GDN_KERNELS_CUDA_CHUNKED_CHUNK_PREP_BLOCKED_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_CHUNK_PREP_BLOCKED_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/chunked/blocked_inverse.cuh"
#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/gate_prefix.cuh"
#include "kernels/cuda/chunked/mma_16bit.cuh"
#include "kernels/cuda/chunked/split_products.cuh"
#include "kernels/cuda/common/cp_async.cuh"
#include "kernels/cuda/common/vector_access.cuh"
#include "kernels/gating.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda::chunked {

// Threads of one kernel-1 block: 8 warps.
inline constexpr int kPrepThreads = 256;

// Shared memory of ChunkPrepBlockedKernel<K, V>, in bytes:
//   kb, qb [64][K+8] Op     raw k, q of the chunk (padding rows zero)
//   vb     [64][V+8] Op     v of the current value head
//   Af, Tf [64][72]  fp32   A; T (its strictly upper blocks are scratch)
//   stage  [128][72] Op     P's staging, then U's ([64][V+8])
//   rk, rq, G, beta, exp(G), exp(G_last - G), bw: 7 x [64] fp32
// K = V = 128: 109,312 bytes, two blocks per SM. Op is 16-bit either way.
template <int K, int V>
struct PrepBlockedSmem {
  static constexpr int kStrideK = K + 8;
  static constexpr int kStrideV = V + 8;
  // 16-byte rows for float4 reads; 72 (not 68) so that the float2 reads of
  // fp32 mma fragments (8 rows x 4 column pairs) fall in distinct banks.
  static constexpr int kStrideF = 72;
  static constexpr int kStrideP = 72;
  static constexpr int kKb = 64 * kStrideK * 2;
  static constexpr int kVb = 64 * kStrideV * 2;
  static constexpr int kF = 64 * kStrideF * 4;
  static constexpr int kStage = 128 * kStrideP * 2;
  static constexpr int kBytes = 2 * kKb + kVb + 2 * kF + kStage + 7 * 64 * 4;
  static_assert(64 * (V + 8) * 2 <= kStage && 64 * (K + 8) * 2 <= kF, "staging fits");
};

// Copies a [64][N] tile of 16-bit elements from shared memory (row stride
// `stride`) to contiguous global memory with 16-byte accesses, threads
// [first, first + count) of the block sharing the pieces.
template <int N, typename T>
__device__ __forceinline__ void CopyTileToGlobal(const T* src, int stride, T* dst, int first,
                                                 int count) {
  for (int p = threadIdx.x - first; p < 64 * (N / 8); p += count) {
    const int r = p / (N / 8), c = (p % (N / 8)) * 8;
    *reinterpret_cast<uint4*>(dst + r * N + c) =
        *reinterpret_cast<const uint4*>(src + r * stride + c);
  }
}

// The merges of step 2 run as split-16-bit tensor-core products
// (SplitMmaBlock), and P, W, U are staged in shared memory and written with
// 16-byte stores (instead of 4-byte stores spread over 8 rows).
template <int K, int V, typename In>
__global__ void __launch_bounds__(kPrepThreads, 2)
    ChunkPrepBlockedKernel(const ChunkArgs args) {
  using S = PrepBlockedSmem<K, V>;
  using Op = OperandFor<In>;
  constexpr int kSK = S::kStrideK, kSV = S::kStrideV, kSF = S::kStrideF, kSP = S::kStrideP;
  static_assert(K % 32 == 0 && V % 32 == 0, "K, V: multiples of 32");
  extern __shared__ __align__(16) unsigned char smem[];
  Op* kb = reinterpret_cast<Op*>(smem);
  Op* qb = kb + 64 * kSK;
  Op* vb = qb + 64 * kSK;
  float* Af = reinterpret_cast<float*>(vb + 64 * kSV);
  float* Tf = Af + 64 * kSF;
  Op* stage = reinterpret_cast<Op*>(Tf + 64 * kSF);
  float* rk_s = reinterpret_cast<float*>(stage + 128 * kSP);
  float* rq_s = rk_s + 64;
  float* G_s = rq_s + 64;
  float* beta_s = G_s + 64;
  float* eg_s = beta_s + 64;  // exp(G_j)
  float* ed_s = eg_s + 64;    // exp(G_last - G_j)
  float* bw_s = ed_s + 64;    // beta_j exp(G_j) rk_j

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
  const In* v = static_cast<const In*>(args.v);
  const int64_t qk_token = static_cast<int64_t>(args.num_qk_heads) * K;
  const int64_t v_token = static_cast<int64_t>(Hv) * V;

  // Gating of token `tid` for value head h (padding: no decay, no write).
  auto load_gate = [&](int h, float& gi, float& bi) {
    gi = 0.f;
    bi = 0.f;
    if (tid < L) {
      const int64_t idx = static_cast<int64_t>(t0 + tid) * Hv + h;
      if (args.fused_gating) {
        gi = FusedDecay(args.a[idx], args.A_log[h], args.dt_bias[h]);
        bi = FusedBeta(args.b[idx]);
      } else {
        gi = args.g[idx];
        bi = args.beta[idx];
      }
    }
  };
  float g_next = 0.f, b_next = 0.f;
  if (tid < kChunk) load_gate(hq * group_size, g_next, b_next);

  // ---- phase 1 (per q/k head): raw q, k -> qb, kb; inverse norms ------------
  // Warp w owns rows 8 w .. 8 w + 7; lane = 8 b + r owns row 8 w + r, elements
  // 32 m + 8 b .. + 7 for m < K / 32 (four lanes share a row).
  {
    constexpr int M = K / 32;
    const int r = lane & 7, b = lane >> 3;
    const int i = warp * 8 + r;
    float kx[M][8], qx[M][8];
    if (i < L) {
      const In* kr = k + static_cast<int64_t>(t0 + i) * qk_token + hq * K + 8 * b;
      const In* qr = q + static_cast<int64_t>(t0 + i) * qk_token + hq * K + 8 * b;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        Load8AsFloats(kr + 32 * m, kx[m]);
        Load8AsFloats(qr + 32 * m, qx[m]);
      }
    } else {
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int e = 0; e < 8; ++e) kx[m][e] = qx[m][e] = 0.f;
    }
    float sk = 0.f, sq = 0.f;
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        sk += kx[m][e] * kx[m][e];
        sq += qx[m][e] * qx[m][e];
      }
    sk += __shfl_xor_sync(0xffffffffu, sk, 8);
    sq += __shfl_xor_sync(0xffffffffu, sq, 8);
    sk += __shfl_xor_sync(0xffffffffu, sk, 16);
    sq += __shfl_xor_sync(0xffffffffu, sq, 16);
    // Rare: a row with max|x| >= ~2^60 overflowed its sum of squares. It is
    // kept rescaled by kL2NormRescale (gdn_types.h) in kb / qb, with the
    // inverse norm of the rescaled row: every product below sees y r_y =
    // x / |x|, and the 16-bit operands hold it. The four lanes of a row hold
    // bitwise equal sums; rows differ, so all lanes redo the sums (factor 1
    // for rows that did not overflow: the same sums again).
    float k_eps = kL2NormEps, q_eps = kL2NormEps;
    if (args.l2_norm_qk &&
        __any_sync(0xffffffffu, !isfinite(sk) || !isfinite(sq))) {
      const float ck = isfinite(sk) ? 1.0f : kL2NormRescale;
      const float cq = isfinite(sq) ? 1.0f : kL2NormRescale;
      if (ck != 1.0f) k_eps = 0.0f;  // 2^-200 below the rescaled sum
      if (cq != 1.0f) q_eps = 0.0f;
      sk = sq = 0.f;
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          kx[m][e] *= ck;
          qx[m][e] *= cq;
          sk += kx[m][e] * kx[m][e];
          sq += qx[m][e] * qx[m][e];
        }
      sk += __shfl_xor_sync(0xffffffffu, sk, 8);
      sq += __shfl_xor_sync(0xffffffffu, sq, 8);
      sk += __shfl_xor_sync(0xffffffffu, sk, 16);
      sq += __shfl_xor_sync(0xffffffffu, sq, 16);
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float* x = kx[m];
      const float* y = qx[m];
      *reinterpret_cast<uint4*>(kb + i * kSK + 32 * m + 8 * b) =
          make_uint4(Pack2<Op>(x[0], x[1]), Pack2<Op>(x[2], x[3]), Pack2<Op>(x[4], x[5]),
                     Pack2<Op>(x[6], x[7]));
      *reinterpret_cast<uint4*>(qb + i * kSK + 32 * m + 8 * b) =
          make_uint4(Pack2<Op>(y[0], y[1]), Pack2<Op>(y[2], y[3]), Pack2<Op>(y[4], y[5]),
                     Pack2<Op>(y[6], y[7]));
    }
    if (b == 0) {
      rk_s[i] = args.l2_norm_qk ? 1.0f / sqrtf(sk + k_eps) : 1.0f;
      rq_s[i] = args.l2_norm_qk ? 1.0f / sqrtf(sq + q_eps) : 1.0f;
    }
  }
  __syncthreads();

  // ---- kk = k k^T and qk = q k^T (per q/k head), normalised, in registers ---
  // Warp (mt, nh): rows 16 mt .., columns 32 nh .. (four 8-column n-tiles).
  const int mt = warp & 3;
  const int nh = warp >> 2;
  float kk[4][4], qk[4][4];
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) kk[nt][e] = qk[nt][e] = 0.f;
  KkQkWarpTile<K>(kb, qb, kSK, mt, nh, lane, kk, qk);
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

    // step 0: v of head h (padding rows zero; cp.async when In is Op),
    // gating, prefix sums.
    {
      const In* vsrc = v + static_cast<int64_t>(t0) * v_token + h * V;
      constexpr int kPiecesPerRow = V / 8;
      for (int p = tid; p < kChunk * kPiecesPerRow; p += kPrepThreads) {
        const int j = p / kPiecesPerRow, e = (p % kPiecesPerRow) * 8;
        Op* dst = vb + j * kSV + e;
        if (j >= L) {
          *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
        } else if constexpr (std::is_same_v<In, Op>) {
          CopyAsync16(dst, vsrc + j * v_token + e);
        } else {
          float x[8];
          Load8AsFloats(vsrc + j * v_token + e, x);
          *reinterpret_cast<uint4*>(dst) =
              make_uint4(Pack2<Op>(x[0], x[1]), Pack2<Op>(x[2], x[3]), Pack2<Op>(x[4], x[5]),
                         Pack2<Op>(x[6], x[7]));
        }
      }
      CopyAsyncCommit();
    }
    if (tid < kChunk) {
      G_s[tid] = g_next;
      beta_s[tid] = b_next;
      if (rr + 1 < group_size) load_gate(h + 1, g_next, b_next);
    }
    __syncthreads();
    if (warp == 0) {  // inclusive prefix sum of g over 64 tokens, 2 per lane
      float G0, G1, g_last;
      WarpChunkPrefix(G_s[2 * lane], G_s[2 * lane + 1], lane, G0, G1, g_last);
      G_s[2 * lane] = G0;
      G_s[2 * lane + 1] = G1;
      const float e0 = expf(G0), e1 = expf(G1);
      eg_s[2 * lane] = e0;
      eg_s[2 * lane + 1] = e1;
      ed_s[2 * lane] = expf(g_last - G0);
      ed_s[2 * lane + 1] = expf(g_last - G1);
      bw_s[2 * lane] = beta_s[2 * lane] * e0 * rk_s[2 * lane];
      bw_s[2 * lane + 1] = beta_s[2 * lane + 1] * e1 * rk_s[2 * lane + 1];
      if (lane == 0) args.decay[ch] = expf(g_last);
    }
    __syncthreads();

    // step 1: A (shared, fp32) and P (workspace; staged, copied out by warps
    // 2-7 in step 2a) from kk, qk.
    Op* p_global = reinterpret_cast<Op*>(args.p) + ch * 64 * 64;
    {
      Op* p_out = stage;
      const int p_stride = kSP;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int i = mt * 16 + group + 8 * half;
          const int j0 = nh * 32 + nt * 8 + 2 * tig;
          float pv[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int j = j0 + e;
            // exp(G_i - G_j) <= 1 for j <= i; never evaluated above the diagonal.
            const float decay = j <= i ? expf(G_s[i] - G_s[j]) : 0.f;
            Af[i * kSF + j] = j < i ? beta_s[i] * decay * kk[nt][2 * half + e] : 0.f;
            pv[e] = args.scale * decay * qk[nt][2 * half + e];
          }
          StoreOpPair(p_out + i * p_stride + j0, pv[0], pv[1]);
        }
      }
    }
    __syncthreads();

    // step 2a: diagonal blocks T_dd = (I + A_dd)^-1 (warps 0-1: thread = column
    // c of block d, forward substitution, x_r = 0 above the diagonal falls
    // out) beside qg and kdt (warps 2-7).
    if (warp < 2) {
      InvertDiagonalBlocks<kSF>(Af, Tf, tid);
    } else {
      const int t = tid - 64;
      constexpr int kOtherThreads = kPrepThreads - 64;
      CopyTileToGlobal<64>(stage, kSP, p_global, 64, kOtherThreads);
      const float scale = args.scale;
      // qg [64][K] = Op(scale exp(G_i) (q_i rq_i)): 16-byte pieces.
      Op* qg_out = reinterpret_cast<Op*>(args.qg) + ch * 64 * K;
      for (int p = t; p < kChunk * (K / 8); p += kOtherThreads) {
        const int i = p / (K / 8), d0 = (p % (K / 8)) * 8;
        const float s = scale * eg_s[i], rq = rq_s[i];
        float x[8];
        const uint4 raw = *reinterpret_cast<const uint4*>(qb + i * kSK + d0);
        const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 raw2 = Unpack2<Op>(w[e]);
          x[2 * e] = s * (raw2.x * rq);
          x[2 * e + 1] = s * (raw2.y * rq);
        }
        *reinterpret_cast<uint4*>(qg_out + i * K + d0) =
            make_uint4(Pack2<Op>(x[0], x[1]), Pack2<Op>(x[2], x[3]), Pack2<Op>(x[4], x[5]),
                       Pack2<Op>(x[6], x[7]));
      }
      // kdt [K][64] = Op(exp(G_last - G_j) (k_j rk_j))^T: per warp task, the
      // 32 tokens 32 jh .. of dims d0 .. d0 + 7, transposed by ldmatrix; lane
      // 4 g + t stores pairs (d0 + g; tokens 32 jh + 8 m + 2 t, + 1).
      Op* kdt_out = reinterpret_cast<Op*>(args.kdt) + ch * K * 64;
      for (int task = warp - 2; task < 2 * (K / 8); task += kPrepThreads / 32 - 2) {
        const int jh = task & 1, d0 = (task >> 1) * 8;
        uint32_t r4[4];
        LdsmTrans4Rows(r4, kb, kSK, 32 * jh, d0, lane);
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const int j = 32 * jh + 8 * m + 2 * tig;
          const float2 raw2 = Unpack2<Op>(r4[m]);
          const float x0 = raw2.x * rk_s[j];
          const float x1 = raw2.y * rk_s[j + 1];
          *reinterpret_cast<uint32_t*>(kdt_out + (d0 + group) * 64 + j) =
              Pack2<Op>(x0 * ed_s[j], x1 * ed_s[j + 1]);
        }
      }
    }
    __syncthreads();

    // step 2b: merge 16 -> 32. Y_p = A_{2p+1,2p} T_{2p,2p} into the scratch
    // block (0, 2 + p) of Tf, then T_{2p+1,2p} = -T_{2p+1,2p+1} Y_p.
    // step 2c: merge 32 -> 64. Y = A[32:64, 0:32] T[0:32, 0:32] into the
    // scratch quadrant Tf[0:32, 32:64] (block (a, b) of Y at rows 16 a, columns
    // 32 + 16 b; T[0:16, 16:32] is zero and skipped), then T[32:64, 0:32] =
    // -T[32:64, 32:64] Y (T[32:48, 48:64] is zero and skipped).
    // One warp per output block.
    if (warp < 2) MergePairFirst<kSF>(Af, Tf, warp, lane);
    __syncthreads();
    if (warp < 2) MergePairSecond<kSF>(Tf, warp, lane);
    __syncthreads();
    if (warp < 4) MergeHalvesFirst<kSF>(Af, Tf, warp, lane);
    __syncthreads();
    if (warp < 4) MergeHalvesSecond<kSF>(Tf, warp, lane);
    __syncthreads();

    CopyAsyncWaitAll();
    __syncthreads();  // T and vb complete

    // step 3: W = (T diag(bw)) k, U = (T diag(beta)) v on tensor cores ->
    // workspace (via [64][K+8] / [64][V+8] tiles over Af, free now, and the
    // stage, free since step 2a).
    Op* w_out = reinterpret_cast<Op*>(args.w) + ch * 64 * K;
    Op* u_out = reinterpret_cast<Op*>(args.u) + ch * 64 * V;
    Op* w_stage = reinterpret_cast<Op*>(Af);
    TProductTo<Op, K, kSF>(Tf, bw_s, kb, kSK, w_stage, K + 8, warp, lane);
    TProductTo<Op, V, kSF>(Tf, beta_s, vb, kSV, stage, V + 8, warp, lane);
    __syncthreads();
    CopyTileToGlobal<K>(w_stage, K + 8, w_out, 0, kPrepThreads);
    CopyTileToGlobal<V>(stage, V + 8, u_out, 0, kPrepThreads);
    __syncthreads();  // vb, Af / Tf, the stage and the gate arrays are reused by the next head
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_CHUNK_PREP_BLOCKED_CUH_
