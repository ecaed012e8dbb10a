// Kernel 1 of the chunked prefill, grouped version (variant 2; the default is
// ChunkPrepBlockedKernel, chunk_prep_blocked.cuh, variant 3): one block
// of 8 warps per (global chunk, q/k head), looping over the G = Hv / Hqk value
// heads of that q/k head. Workspace: chunk_args.h.
//
// What the first version (one block per value head) did per value head and
// this one does once per q/k head:
//   - the loads of q and k (16-byte vector loads, every load of a thread
//     issued before any is used), the L2 norms, kn / qn kept in fp32 in
//     shared memory (the elementwise outputs read them from there, never
//     from global memory again);
//   - kn kn^T and qn kn^T on tensor cores, kept in registers (fp32) across
//     the value-head loop.
// Per value head h:
//   step 0  v of head h -> shared (bf16; cp.async for bf16 inputs), gating
//           (prefetched one head ahead), prefix sum G, exp(G), exp(G_last - G);
//   step 1  A = strictly_lower(beta_i exp(G_i - G_j) kk_ij) (fp32, shared) and
//           P (global) from the register fragments;
//   step 2  warps 0-1: T = (I + A)^-1, one column per thread in registers
//           (forward substitution), written as
//           Tw = T diag(beta exp(G)) and Tu = T diag(beta) in bf16;
//           warps 2-7 meanwhile: qg = scale exp(G) qn and kdt = (exp(G_last -
//           G) kn)^T from shared memory to the workspace (16-byte stores);
//   step 3  W = Tw kn, U = Tu v on tensor cores -> workspace.
// Rounding: W = bf16(T beta exp(G)) bf16(kn) instead of bf16(T) bf16(beta
// exp(G) kn) (two bf16 roundings either way); U = bf16(T beta) v, where v is
// exact for bf16 inputs (one rounding instead of two). qg, kdt, P and the
// decay are computed as the first version computed them.
#ifndef GDN_KERNELS_CUDA_CHUNKED_CHUNK_PREP_GROUP_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_CHUNK_PREP_GROUP_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/prep_common.cuh"
#include "kernels/cuda/chunked/mma_bf16.cuh"
#include "kernels/gating.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda::chunked {

// Shared memory of ChunkPrepGroupKernel<K, V>, in bytes:
//   kn  [64][K+4] fp32   (row stride = 4 mod 32 words: the column reads of
//                         kdt and of W's B fragments are conflict-free)
//   qn  [64][K+8] fp32   (row stride = 8 mod 32 words: float2 fragment reads)
//   v   [64][V+8] bf16   (the current value head)
//   A   [64][72]  fp32; after the solve the same bytes hold Tw, Tu [64][72] bf16
//   G, beta, exp(G), exp(G_last - G): 4 x [64] fp32
// K = V = 128: 105,472 bytes, two blocks per SM.
template <int K, int V>
struct PrepGroupSmem {
  static constexpr int kStrideKn = K + 4;
  static constexpr int kStrideQn = K + 8;
  static constexpr int kStrideV = V + 8;
  static constexpr int kStrideA = 72;
  static constexpr int kKn = 64 * kStrideKn * 4;
  static constexpr int kQn = 64 * kStrideQn * 4;
  static constexpr int kV = 64 * kStrideV * 2;
  static constexpr int kA = 64 * kStrideA * 4;
  static constexpr int kBytes = kKn + kQn + kV + kA + 4 * 64 * 4;
};

// A fragment (mma_bf16.cuh layout) of the 16 x 16 fp32 tile at `tile`
// (row-major, `stride` floats, even), rounded to bf16.
__device__ __forceinline__ void LoadAF32(uint32_t a[4], const float* tile, int stride,
                                         int lane) {
  const int group = lane >> 2, tig = lane & 3;
  const float* p0 = tile + group * stride + 2 * tig;
  const float* p1 = p0 + 8 * stride;
  const float2 x0 = *reinterpret_cast<const float2*>(p0);
  const float2 x1 = *reinterpret_cast<const float2*>(p1);
  const float2 x2 = *reinterpret_cast<const float2*>(p0 + 8);
  const float2 x3 = *reinterpret_cast<const float2*>(p1 + 8);
  a[0] = PackBf16(x0.x, x0.y);
  a[1] = PackBf16(x1.x, x1.y);
  a[2] = PackBf16(x2.x, x2.y);
  a[3] = PackBf16(x3.x, x3.y);
}

// B fragment of the 16 (k) x 8 (n) tile whose transpose ([n][k], fp32,
// `stride` floats, even) is at `tile_t`, rounded to bf16.
__device__ __forceinline__ void LoadBF32(uint32_t b[2], const float* tile_t, int stride,
                                         int lane) {
  const int group = lane >> 2, tig = lane & 3;
  const float* p = tile_t + group * stride + 2 * tig;
  const float2 x0 = *reinterpret_cast<const float2*>(p);
  const float2 x1 = *reinterpret_cast<const float2*>(p + 8);
  b[0] = PackBf16(x0.x, x0.y);
  b[1] = PackBf16(x1.x, x1.y);
}

// Barrier over the first `count` threads (whole warps) of the block, id 1.
__device__ __forceinline__ void SolverBarrier(int count) {
  asm volatile("bar.sync 1, %0;\n" ::"r"(count) : "memory");
}

template <int K, int V, typename In>
__global__ void __launch_bounds__(kPrepThreads, 2)
    ChunkPrepGroupKernel(const ChunkArgs args) {
  using S = PrepGroupSmem<K, V>;
  constexpr int kSKn = S::kStrideKn, kSQn = S::kStrideQn, kSV = S::kStrideV, kSA = S::kStrideA;
  constexpr int kSolverThreads = 64;  // warps 0-1: one column of T each
  constexpr int kOtherThreads = kPrepThreads - kSolverThreads;
  extern __shared__ __align__(16) unsigned char smem[];
  float* kn_s = reinterpret_cast<float*>(smem);
  float* qn_s = reinterpret_cast<float*>(smem + S::kKn);
  bf16* v_s = reinterpret_cast<bf16*>(smem + S::kKn + S::kQn);
  float* A_s = reinterpret_cast<float*>(smem + S::kKn + S::kQn + S::kV);
  bf16* Tw_s = reinterpret_cast<bf16*>(A_s);  // over A, after the solve
  bf16* Tu_s = Tw_s + 64 * kSA;
  float* G_s = A_s + 64 * kSA;
  float* beta_s = G_s + 64;
  float* eg_s = beta_s + 64;  // exp(G_j)
  float* ed_s = eg_s + 64;    // exp(G_last - G_j)

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

  // ---- phase 1 (per q/k head): loads, norms, kn / qn in fp32 -----------------
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
        Load8(kr + 32 * m, kx[m]);
        Load8(qr + 32 * m, qx[m]);
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
    const float rk = args.l2_norm_qk ? 1.0f / sqrtf(sk + kL2NormEps) : 1.0f;
    const float rq = args.l2_norm_qk ? 1.0f / sqrtf(sq + kL2NormEps) : 1.0f;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float* kd = kn_s + i * kSKn + 32 * m + 8 * b;
      float* qd = qn_s + i * kSQn + 32 * m + 8 * b;
      *reinterpret_cast<float4*>(kd) =
          make_float4(kx[m][0] * rk, kx[m][1] * rk, kx[m][2] * rk, kx[m][3] * rk);
      *reinterpret_cast<float4*>(kd + 4) =
          make_float4(kx[m][4] * rk, kx[m][5] * rk, kx[m][6] * rk, kx[m][7] * rk);
      *reinterpret_cast<float4*>(qd) =
          make_float4(qx[m][0] * rq, qx[m][1] * rq, qx[m][2] * rq, qx[m][3] * rq);
      *reinterpret_cast<float4*>(qd + 4) =
          make_float4(qx[m][4] * rq, qx[m][5] * rq, qx[m][6] * rq, qx[m][7] * rq);
    }
  }
  __syncthreads();

  // ---- kn kn^T and qn kn^T (per q/k head), kept in registers ----------------
  const int mt = warp & 3;   // rows 16 mt ..
  const int nh = warp >> 2;  // cols 32 nh ..
  float kk[4][4], qk[4][4];
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) kk[nt][e] = qk[nt][e] = 0.f;
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks) {
    uint32_t ak[4], aq[4];
    LoadAF32(ak, kn_s + mt * 16 * kSKn + ks * 16, kSKn, lane);
    LoadAF32(aq, qn_s + mt * 16 * kSQn + ks * 16, kSQn, lane);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      uint32_t bf[2];
      LoadBF32(bf, kn_s + (nh * 32 + nt * 8) * kSKn + ks * 16, kSKn, lane);
      Mma16816(kk[nt], ak, bf);
      Mma16816(qk[nt], aq, bf);
    }
  }

  // ---- the value heads of this q/k head ---------------------------------------
  for (int rr = 0; rr < group_size; ++rr) {
    const int h = hq * group_size + rr;
    const int64_t ch = static_cast<int64_t>(c) * Hv + h;

    // step 0: v of head h (padding rows zero), gating, prefix sums.
    {
      const In* vb = v + static_cast<int64_t>(t0) * v_token + h * V;
      constexpr int kPiecesPerRow = V / 8;
      for (int p = tid; p < kChunk * kPiecesPerRow; p += kPrepThreads) {
        const int j = p / kPiecesPerRow, e = (p % kPiecesPerRow) * 8;
        bf16* dst = v_s + j * kSV + e;
        if (j >= L) {
          *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
        } else if constexpr (std::is_same_v<In, bf16>) {
          CpAsync16(dst, vb + j * v_token + e);
        } else {
          float x[8];
          Load8(vb + j * v_token + e, x);
          *reinterpret_cast<uint4*>(dst) = make_uint4(PackBf16(x[0], x[1]), PackBf16(x[2], x[3]),
                                                      PackBf16(x[4], x[5]), PackBf16(x[6], x[7]));
        }
      }
      CpAsyncCommit();
    }
    if (tid < kChunk) {
      G_s[tid] = g_next;
      beta_s[tid] = b_next;
      if (rr + 1 < group_size) load_gate(h + 1, g_next, b_next);
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
      const float G0 = before + x0, G1 = before + x0 + x1;
      const float g_last = __shfl_sync(0xffffffffu, G1, 31);  // = G_{L-1}: padding has g = 0
      G_s[2 * lane] = G0;
      G_s[2 * lane + 1] = G1;
      eg_s[2 * lane] = expf(G0);
      eg_s[2 * lane + 1] = expf(G1);
      ed_s[2 * lane] = expf(g_last - G0);
      ed_s[2 * lane + 1] = expf(g_last - G1);
      if (lane == 0) args.decay[ch] = expf(g_last);
    }
    __syncthreads();

    // step 1: A (shared, fp32) and P (workspace) from kk, qk.
    {
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

    // step 2: the solve (warps 0-1) beside qg and kdt (warps 2-7).
    if (warp < kSolverThreads / 32) {
      // Column `col` of T solves (I + A) x = e_col by forward substitution:
      // x_i = [i == col] - sum_{j<i} A_ij x_j (x_i = 0 for i < col falls out).
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
      const float bu = beta_s[col];
      const float bw = bu * eg_s[col];
      SolverBarrier(kSolverThreads);  // every column done reading A: Tw, Tu overwrite it
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        Tw_s[i * kSA + col] = __float2bfloat16_rn(x[i] * bw);
        Tu_s[i * kSA + col] = __float2bfloat16_rn(x[i] * bu);
      }
    } else {
      const int t = tid - kSolverThreads;
      const float scale = args.scale;
      bf16* qg_out = reinterpret_cast<bf16*>(args.qg) + ch * 64 * K;
      for (int p = t; p < kChunk * (K / 8); p += kOtherThreads) {
        const int i = p / (K / 8), d0 = (p % (K / 8)) * 8;
        const float s = scale * eg_s[i];
        const float4 a = *reinterpret_cast<const float4*>(qn_s + i * kSQn + d0);
        const float4 b = *reinterpret_cast<const float4*>(qn_s + i * kSQn + d0 + 4);
        *reinterpret_cast<uint4*>(qg_out + i * K + d0) =
            make_uint4(PackBf16(s * a.x, s * a.y), PackBf16(s * a.z, s * a.w),
                       PackBf16(s * b.x, s * b.y), PackBf16(s * b.z, s * b.w));
      }
      // kdt [K][64]: thread p writes row d, tokens 16 jg .. 16 jg + 15 (32 bytes);
      // lanes take consecutive d, so the column reads of kn hit distinct banks.
      bf16* kdt_out = reinterpret_cast<bf16*>(args.kdt) + ch * K * 64;
      for (int p = t; p < K * 4; p += kOtherThreads) {
        const int d = p % K, j0 = (p / K) * 16;
        uint32_t w[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int j = j0 + 2 * u;
          w[u] = PackBf16(ed_s[j] * kn_s[j * kSKn + d], ed_s[j + 1] * kn_s[(j + 1) * kSKn + d]);
        }
        uint4* dst = reinterpret_cast<uint4*>(kdt_out + d * 64 + j0);
        dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
        dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
      }
    }
    CpAsyncWaitAll();
    __syncthreads();  // Tw, Tu and v_s complete

    // step 3: W = Tw kn, U = Tu v on tensor cores -> workspace.
    {
      const int row = mt * 16 + group;
      uint32_t a[4][4];
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) LoadA(a[ks], Tw_s + mt * 16 * kSA + ks * 16, kSA, lane);
      bf16* w_out = reinterpret_cast<bf16*>(args.w) + ch * 64 * K;
#pragma unroll 2
      for (int nt = 0; nt < K / 16; ++nt) {
        const int n0 = nh * (K / 2) + nt * 8;
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          // B [k = token][n = d] = kn[token][d]: column reads of kn.
          const float* p = kn_s + (ks * 16 + 2 * tig) * kSKn + n0 + group;
          uint32_t bf[2];
          bf[0] = PackBf16(p[0], p[kSKn]);
          bf[1] = PackBf16(p[8 * kSKn], p[9 * kSKn]);
          Mma16816(acc, a[ks], bf);
        }
        StorePair(w_out + row * K + n0 + 2 * tig, acc[0], acc[1]);
        StorePair(w_out + (row + 8) * K + n0 + 2 * tig, acc[2], acc[3]);
      }
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) LoadA(a[ks], Tu_s + mt * 16 * kSA + ks * 16, kSA, lane);
      bf16* u_out = reinterpret_cast<bf16*>(args.u) + ch * 64 * V;
#pragma unroll 2
      for (int nt = 0; nt < V / 16; ++nt) {
        const int n0 = nh * (V / 2) + nt * 8;
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const bf16* p = v_s + (ks * 16 + 2 * tig) * kSV + n0 + group;
          uint32_t bf[2];
          bf[0] = PackRaw(p[0], p[kSV]);
          bf[1] = PackRaw(p[8 * kSV], p[9 * kSV]);
          Mma16816(acc, a[ks], bf);
        }
        StorePair(u_out + row * V + n0 + 2 * tig, acc[0], acc[1]);
        StorePair(u_out + (row + 8) * V + n0 + 2 * tig, acc[2], acc[3]);
      }
    }
    __syncthreads();  // v_s, A / T and the gate arrays are reused by the next head
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_CHUNK_PREP_GROUP_CUH_
