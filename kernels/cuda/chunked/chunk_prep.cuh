// Kernel 1 of the chunked prefill: everything of a 64-token chunk that does
// not depend on the state, one block per (global chunk, value head), 8 warps.
//
//   phase 1  L2 norms of q, k rows (fp32) -> bf16 kn, qn in shared memory;
//            gating g, beta per token; inclusive prefix sum G (warp scan).
//   phase 2  tensor cores: kn kn^T and qn kn^T [64 x 64] (fp32 accumulate);
//            A (strictly lower, fp32, shared) and P (global, bf16).
//   phase 3  T = (I + A)^-1 in fp32, while the other warps put beta exp(G) kn
//            and beta v transposed into shared memory (bf16) for phase 4 and
//            write qg and kdt out. Two solvers (args.solve_variant):
//              0  column-wise forward substitution, 4 threads per column,
//                 all 8 warps, then the elementwise work;
//              1  one thread per column with the column in registers (fully
//                 unrolled, 4 partial sums), warps 0-1, while warps 2-7 do
//                 the elementwise work at the same time.
//   phase 4  tensor cores: W = T (beta exp(G) kn), U = T (beta v) with T
//            rounded to bf16 (as flash-linear-attention does), written out.
// The workspace layout is in chunk_args.h.
#ifndef GDN_KERNELS_CUDA_CHUNKED_CHUNK_PREP_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_CHUNK_PREP_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/mma_bf16.cuh"
#include "kernels/gating.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda::chunked {

inline constexpr int kPrepThreads = 256;

// Shared memory of ChunkPrepKernel<K, V>, in bytes.
//   region X  phases 1-2: kn [64][K+8], qn [64][K+8] (bf16)
//             phases 3-4: kbT [K][72], vbT [V][72], kdT staging [K][72] (bf16)
//   Am        [64][68] fp32 (A, 16-byte rows); after solver 0 it holds T as
//             bf16 [64][72]
//   Tf        [64][65] fp32 (T of solver 0); solver 1 writes T as bf16
//             [64][72] here
//   4 x [64]  fp32: G, beta, 1/|q|, 1/|k|
template <int K, int V>
struct PrepSmem {
  static constexpr int kStrideK = K + 8;  // [64][K] bf16 rows
  static constexpr int kStrideC = 72;     // [*][64] bf16 rows
  static constexpr int kStrideF = 65;     // [64][64] fp32 rows (T)
  static constexpr int kStrideA = 68;     // [64][64] fp32 rows (A), float4 reads
  static constexpr int kRegionX12 = 2 * 64 * kStrideK * 2;
  static constexpr int kRegionX34 = (2 * K + V) * kStrideC * 2;
  static constexpr int kRegionX = kRegionX12 > kRegionX34 ? kRegionX12 : kRegionX34;
  static constexpr int kMatA = 64 * kStrideA * 4;
  static constexpr int kMatF = 64 * kStrideF * 4;
  static constexpr int kBytes = kRegionX + kMatA + kMatF + 4 * 64 * 4;
};

template <int K, int V, typename In>
__global__ void __launch_bounds__(kPrepThreads, 2)
    ChunkPrepKernel(const ChunkArgs args) {
  using S = PrepSmem<K, V>;
  constexpr int kSK = S::kStrideK, kSC = S::kStrideC, kSF = S::kStrideF, kSA = S::kStrideA;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* kn_s = reinterpret_cast<bf16*>(smem);  // phases 1-2
  bf16* qn_s = kn_s + 64 * kSK;
  bf16* kbT_s = reinterpret_cast<bf16*>(smem);  // phases 3-4
  bf16* vbT_s = kbT_s + K * kSC;
  bf16* kdT_s = vbT_s + V * kSC;
  float* A_s = reinterpret_cast<float*>(smem + S::kRegionX);
  float* T_s = reinterpret_cast<float*>(smem + S::kRegionX + S::kMatA);
  // T in bf16 for phase 4: over A after solver 0, over T_s for solver 1.
  bf16* Tb_s = reinterpret_cast<bf16*>(args.solve_variant == 1 ? T_s : A_s);
  float* G_s = T_s + 64 * kSF;
  float* beta_s = G_s + 64;
  float* rq_s = beta_s + 64;
  float* rk_s = rq_s + 64;

  const int c = blockIdx.x, h = blockIdx.y;
  const int Hv = args.num_v_heads;
  const int hq = h / args.group_size;
  const int n = args.chunk_table[args.num_seqs + 1 + c];
  const int seq_end = args.cu_seqlens[n + 1];
  const int t0 = args.cu_seqlens[n] + (c - args.chunk_table[n]) * kChunk;
  const int L = min(kChunk, seq_end - t0);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int group = lane >> 2, tig = lane & 3;
  const int64_t ch = static_cast<int64_t>(c) * Hv + h;

  const In* q = static_cast<const In*>(args.q);
  const In* k = static_cast<const In*>(args.k);
  const In* v = static_cast<const In*>(args.v);
  const int64_t qk_token = static_cast<int64_t>(args.num_qk_heads) * K;
  const int64_t v_token = static_cast<int64_t>(Hv) * V;

  // ---- phase 1: norms, bf16 kn / qn, gating ---------------------------------
  for (int i = warp; i < kChunk; i += kPrepThreads / 32) {
    float kx[K / 32], qx[K / 32];
    float sk = 0.f, sq = 0.f;
    if (i < L) {
      const In* kr = k + (t0 + i) * qk_token + hq * K;
      const In* qr = q + (t0 + i) * qk_token + hq * K;
#pragma unroll
      for (int m = 0; m < K / 32; ++m) {
        kx[m] = ElemToFloat(kr[lane + 32 * m]);
        qx[m] = ElemToFloat(qr[lane + 32 * m]);
        sk += kx[m] * kx[m];
        sq += qx[m] * qx[m];
      }
    } else {
#pragma unroll
      for (int m = 0; m < K / 32; ++m) kx[m] = qx[m] = 0.f;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      sk += __shfl_xor_sync(0xffffffffu, sk, off);
      sq += __shfl_xor_sync(0xffffffffu, sq, off);
    }
    const float rk = args.l2_norm_qk ? 1.0f / sqrtf(sk + kL2NormEps) : 1.0f;
    const float rq = args.l2_norm_qk ? 1.0f / sqrtf(sq + kL2NormEps) : 1.0f;
#pragma unroll
    for (int m = 0; m < K / 32; ++m) {
      kn_s[i * kSK + lane + 32 * m] = __float2bfloat16_rn(kx[m] * rk);
      qn_s[i * kSK + lane + 32 * m] = __float2bfloat16_rn(qx[m] * rq);
    }
    if (lane == 0) {
      rk_s[i] = i < L ? rk : 0.f;
      rq_s[i] = i < L ? rq : 0.f;
    }
  }
  if (tid < kChunk) {
    float gi = 0.f, bi = 0.f;  // padding tokens: no decay, no write
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
    G_s[tid] = gi;
    beta_s[tid] = bi;
  }
  __syncthreads();
  if (warp == 0) {  // inclusive prefix sum of g over 64 tokens, 2 per lane
    const float x0 = G_s[2 * lane], x1 = G_s[2 * lane + 1];
    float s = x0 + x1;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, s, off);
      if (lane >= off) s += y;
    }
    float before = __shfl_up_sync(0xffffffffu, s, 1);
    if (lane == 0) before = 0.f;
    G_s[2 * lane] = before + x0;
    G_s[2 * lane + 1] = before + x0 + x1;
  }
  __syncthreads();

  // ---- phase 2: kn kn^T and qn kn^T on tensor cores -> A, P ------------------
  {
    const int mt = warp & 3;   // rows 16 mt ..
    const int nh = warp >> 2;  // cols 32 nh ..
    float kk[4][4], qk[4][4];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) kk[nt][r] = qk[nt][r] = 0.f;
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks) {
      uint32_t ak[4], aq[4];
      LoadA(ak, kn_s + mt * 16 * kSK + ks * 16, kSK, lane);
      LoadA(aq, qn_s + mt * 16 * kSK + ks * 16, kSK, lane);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        uint32_t bf[2];
        LoadB(bf, kn_s + (nh * 32 + nt * 8) * kSK + ks * 16, kSK, lane);
        Mma16816(kk[nt], ak, bf);
        Mma16816(qk[nt], aq, bf);
      }
    }
    bf16* p_out = reinterpret_cast<bf16*>(args.p) + ch * 64 * 64;
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
          A_s[i * kSA + j] = j < i ? beta_s[i] * decay * kk[nt][2 * half + e] : 0.f;
          pv[e] = args.scale * decay * qk[nt][2 * half + e];
        }
        StorePair(p_out + i * 64 + j0, pv[0], pv[1]);
      }
    }
  }
  __syncthreads();

  // ---- phase 3: operands of phase 4, qg, kdt; T = (I + A)^-1 -----------------
  const float g_last = G_s[kChunk - 1];  // = G_{L-1}: padding has g = 0
  // Elementwise work over threads [first, first + count) of the block.
  auto elementwise = [&](int first, int count) {
    bf16* qg_out = reinterpret_cast<bf16*>(args.qg) + ch * 64 * K;
    for (int idx = tid - first; idx < kChunk * K; idx += count) {
      const int j = idx / K, d = idx % K;
      float kb = 0.f, kd = 0.f, qg = 0.f;
      if (j < L) {
        const int64_t off = (t0 + j) * qk_token + hq * K + d;
        const float kn = ElemToFloat(k[off]) * rk_s[j];
        const float qn = ElemToFloat(q[off]) * rq_s[j];
        const float eg = expf(G_s[j]);
        kb = beta_s[j] * eg * kn;
        kd = expf(g_last - G_s[j]) * kn;
        qg = args.scale * eg * qn;
      }
      kbT_s[d * kSC + j] = __float2bfloat16_rn(kb);
      kdT_s[d * kSC + j] = __float2bfloat16_rn(kd);
      qg_out[idx] = __float2bfloat16_rn(qg);
    }
    for (int idx = tid - first; idx < kChunk * V; idx += count) {
      const int j = idx / V, e = idx % V;
      const float vb =
          j < L ? beta_s[j] * ElemToFloat(v[(t0 + j) * v_token + h * V + e]) : 0.f;
      vbT_s[e * kSC + j] = __float2bfloat16_rn(vb);
    }
  };
  if (args.solve_variant == 1) {
    if (warp < 2) {
      // Column `col` of T solves (I + A) x = e_col by forward substitution:
      // x_i = [i == col] - sum_{j<i} A_ij x_j (x_i = 0 for i < col falls out).
      // A's rows are broadcast float4 reads; x stays in registers.
      const int col = tid;
      float x[kChunk];
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
        const float* a_row = A_s + i * kSA;
#pragma unroll
        for (int j4 = 0; j4 < i / 4; ++j4) {
          const float4 a4 = *reinterpret_cast<const float4*>(a_row + 4 * j4);
          s0 = fmaf(a4.x, x[4 * j4], s0);
          s1 = fmaf(a4.y, x[4 * j4 + 1], s1);
          s2 = fmaf(a4.z, x[4 * j4 + 2], s2);
          s3 = fmaf(a4.w, x[4 * j4 + 3], s3);
        }
#pragma unroll
        for (int j = (i / 4) * 4; j < i; ++j) s0 = fmaf(a_row[j], x[j], s0);
        x[i] = (i == col ? 1.f : 0.f) - ((s0 + s1) + (s2 + s3));
      }
#pragma unroll
      for (int i = 0; i < kChunk; ++i) Tb_s[i * kSC + col] = __float2bfloat16_rn(x[i]);
    } else {
      elementwise(64, kPrepThreads - 64);
    }
    __syncthreads();
  } else {
    elementwise(0, kPrepThreads);
    // Column `col` of T solves (I + A) x = e_col: x_i = [i == col] - sum_{j<i}
    // A_ij x_j, x_i = 0 for i < col. Four threads (one quad) per column split
    // the sum over j; quad-shuffles combine it.
    const int col = tid >> 2, part = tid & 3;
    for (int i = 0; i < kChunk; ++i) {
      float s = 0.f;
      for (int j = col + part; j < i; j += 4) s += A_s[i * kSA + j] * T_s[j * kSF + col];
      __syncwarp();
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      if (part == 0) T_s[i * kSF + col] = i == col ? 1.f : (i < col ? 0.f : -s);
      __syncwarp();
    }
    __syncthreads();
    for (int idx = tid; idx < kChunk * kChunk; idx += kPrepThreads) {
      const int i = idx / kChunk, j = idx % kChunk;
      Tb_s[i * kSC + j] = __float2bfloat16_rn(T_s[i * kSF + j]);
    }
  }
  {
    bf16* kdt_out = reinterpret_cast<bf16*>(args.kdt) + ch * K * 64;
    for (int piece = tid; piece < K * 8; piece += kPrepThreads) {
      const int r = piece >> 3, c8 = (piece & 7) * 8;
      *reinterpret_cast<uint4*>(kdt_out + r * 64 + c8) =
          *reinterpret_cast<const uint4*>(kdT_s + r * kSC + c8);
    }
  }
  if (tid == 0) args.decay[ch] = expf(g_last);
  __syncthreads();

  // ---- phase 4: W = T kbT^T, U = T vbT^T on tensor cores ---------------------
  {
    const int mt = warp & 3, nh = warp >> 2;
    uint32_t a[4][4];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) LoadA(a[ks], Tb_s + mt * 16 * kSC + ks * 16, kSC, lane);
    const int row = mt * 16 + group;
    bf16* w_out = reinterpret_cast<bf16*>(args.w) + ch * 64 * K;
#pragma unroll 2
    for (int nt = 0; nt < K / 16; ++nt) {
      const int n0 = nh * (K / 2) + nt * 8;
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        uint32_t bf[2];
        LoadB(bf, kbT_s + n0 * kSC + ks * 16, kSC, lane);
        Mma16816(acc, a[ks], bf);
      }
      StorePair(w_out + row * K + n0 + 2 * tig, acc[0], acc[1]);
      StorePair(w_out + (row + 8) * K + n0 + 2 * tig, acc[2], acc[3]);
    }
    bf16* u_out = reinterpret_cast<bf16*>(args.u) + ch * 64 * V;
#pragma unroll 2
    for (int nt = 0; nt < V / 16; ++nt) {
      const int n0 = nh * (V / 2) + nt * 8;
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        uint32_t bf[2];
        LoadB(bf, vbT_s + n0 * kSC + ks * 16, kSC, lane);
        Mma16816(acc, a[ks], bf);
      }
      StorePair(u_out + row * V + n0 + 2 * tig, acc[0], acc[1]);
      StorePair(u_out + (row + 8) * V + n0 + 2 * tig, acc[2], acc[3]);
    }
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_CHUNK_PREP_CUH_
