// Kernel 2 of the chunked prefill: the sequential pass over a sequence's
// chunks, one block per (sequence, value head, V tile of VT columns) of
// 4 * VT / WC warps: warp w = 4 cw + rw owns rows [16 rw, 16 rw + 16) of U'
// and O, state rows [rw K / 4, (rw + 1) K / 4), and columns
// [cw WC, (cw + 1) WC) of the tile; all warps share the staged W, Qg, Kd, P
// tiles (each read from L2 once per (chunk, head, V tile)). The [K, VT] state
// tile lives in registers (fp32) as mma accumulators; per chunk, with the
// tiles kernel 1 left in the workspace:
//   U' = U - W S              [64, VT]   (rounded to bf16, kept transposed)
//   O  = Qg S + P U'          [64, VT]   -> o
//   S  = exp(G_last) S + Kd^T U'
// S enters the products as bf16 (S^T in shared memory), fp32 accumulation;
// the same roundings as flash-linear-attention's chunk_gated_delta_rule.
// The next chunk's tiles stream into the other shared-memory stage with
// cp.async while this chunk computes.
//
// The knobs change no result bit (same products, same accumulation order):
//   WC     columns per warp (8, 16 or 32): fewer columns, more warps per SM
//          to hide the mma / shared-memory latency of the serial chain (one
//          block per SM: the pass is latency-bound, bench/prefill/NOTES.md);
//   kLdsm  mma fragments by ldmatrix (one instruction per 4 8x8 matrices)
//          instead of 32-bit shared loads.
// o's and the pages' dtypes are read at run time (args.io_dtype,
// args.state_dtype): they only touch the stores, once per chunk and once per
// block, so the instances are K x V x VT x knobs.
#ifndef GDN_KERNELS_CUDA_CHUNKED_STATE_PASS_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_STATE_PASS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/mma_bf16.cuh"
#include "kernels/cuda/chunked/state_tile.cuh"
#include "kernels/gdn_params.h"

namespace gdn::cuda::chunked {

// Threads per block of StatePassKernel<..., VT, WC, ...>.
template <int VT, int WC>
inline constexpr int kStateThreadsFor = 128 * (VT / WC);

// Shared memory of StatePassKernel<K, V, VT, ...>, in bytes: two stages of
//   w [64][K+8], qg [64][K+8], kdt [K][72], p [64][72], u [64][VT+8] (bf16)
// then sT [VT][K+8] (S^T, bf16) and uT [VT][72] (U'^T, bf16).
template <int K, int VT>
struct StateSmem {
  static constexpr int kStrideK = K + 8;
  static constexpr int kStrideC = 72;
  static constexpr int kStrideU = VT + 8;
  static constexpr int kStageElems =
      2 * 64 * kStrideK + K * kStrideC + 64 * kStrideC + 64 * kStrideU;
  static constexpr int kBytes =
      (2 * kStageElems + VT * kStrideK + VT * kStrideC) * 2;
};

// An A fragment: ldmatrix or 32-bit loads.
template <bool kLdsm>
__device__ __forceinline__ void FragA(uint32_t a[4], const bf16* tile, int stride, int lane) {
  if constexpr (kLdsm) {
    LdsmA(a, tile, stride, lane);
  } else {
    LoadA(a, tile, stride, lane);
  }
}
template <int K, int V, int VT, int WC, bool kLdsm>
__global__ void __launch_bounds__(kStateThreadsFor<VT, WC>, 1)
    StatePassKernel(const ChunkArgs args) {
  using Smem = StateSmem<K, VT>;
  constexpr int kStateThreads = kStateThreadsFor<VT, WC>;
  constexpr int kSK = Smem::kStrideK, kSC = Smem::kStrideC, kSU = Smem::kStrideU;
  constexpr int kTiles = V / VT;
  static_assert((WC == 8 || WC == 16 || WC == 32) && VT % WC == 0, "warp layout");
  constexpr int MT = K / 64;  // 16-row tiles of S per warp
  constexpr int NT = WC / 8;  // 8-column tiles of a warp's columns
  constexpr int kPair = kLdsm && NT % 2 == 0 ? 2 : 1;  // n-tiles per B load
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* stage_base = reinterpret_cast<bf16*>(smem);
  bf16* sT_s = stage_base + 2 * Smem::kStageElems;
  bf16* uT_s = sT_s + VT * kSK;

  const int Hv = args.num_v_heads;
  const int vt = blockIdx.x % kTiles;
  const int h = (blockIdx.x / kTiles) % Hv;
  const int n = blockIdx.x / (kTiles * Hv);
  const int v0 = vt * VT;
  const int c_begin = args.chunk_table[n], c_end = args.chunk_table[n + 1];
  const int seq_begin = args.cu_seqlens[n], seq_end = args.cu_seqlens[n + 1];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int group = lane >> 2, tig = lane & 3;
  const int rw = warp & 3;          // row group
  const int e0 = (warp >> 2) * WC;  // first column of this warp in the tile

  const bf16* w_g = reinterpret_cast<const bf16*>(args.w);
  const bf16* qg_g = reinterpret_cast<const bf16*>(args.qg);
  const bf16* kdt_g = reinterpret_cast<const bf16*>(args.kdt);
  const bf16* p_g = reinterpret_cast<const bf16*>(args.p);
  const bf16* u_g = reinterpret_cast<const bf16*>(args.u);

  // Stage st: w, qg, kdt, p, u.
  auto stage_ptr = [&](int st) { return stage_base + st * Smem::kStageElems; };
  auto issue_loads = [&](int c, int st) {
    const int64_t ch = static_cast<int64_t>(c) * Hv + h;
    bf16* w_s = stage_ptr(st);
    bf16* qg_s = w_s + 64 * kSK;
    bf16* kdt_s = qg_s + 64 * kSK;
    bf16* p_s = kdt_s + K * kSC;
    bf16* u_s = p_s + 64 * kSC;
    CpAsyncTile<kStateThreads>(w_s, kSK, w_g + ch * 64 * K, K, 64, K);
    CpAsyncTile<kStateThreads>(qg_s, kSK, qg_g + ch * 64 * K, K, 64, K);
    CpAsyncTile<kStateThreads>(kdt_s, kSC, kdt_g + ch * K * 64, 64, K, 64);
    CpAsyncTile<kStateThreads>(p_s, kSC, p_g + ch * 64 * 64, 64, 64, 64);
    CpAsyncTile<kStateThreads>(u_s, kSU, u_g + ch * 64 * V + v0, V, 64, VT);
  };

  // Page ids outside the pool: the sequence's o becomes NaN, no page is touched.
  const bool pages_ok = PagesOk(args, n);
  float S[MT][NT][4];
  LoadInitialState<K, V>(S, sT_s, kSK, args, n, h, v0, rw, e0, lane, pages_ok);

  const int64_t o_token = static_cast<int64_t>(Hv) * V;
  if (c_begin < c_end) issue_loads(c_begin, 0);
  CpAsyncCommit();
  for (int c = c_begin; c < c_end; ++c) {
    const int st = (c - c_begin) & 1;
    const float decay = args.decay[static_cast<int64_t>(c) * Hv + h];
    CpAsyncWaitAll();
    __syncthreads();  // stage st landed; chunk c - 1 is done with stage st ^ 1, uT
    if (c + 1 < c_end) issue_loads(c + 1, st ^ 1);
    CpAsyncCommit();

    const bf16* w_s = stage_ptr(st);
    const bf16* qg_s = w_s + 64 * kSK;
    const bf16* kdt_s = qg_s + 64 * kSK;
    const bf16* p_s = kdt_s + K * kSC;
    const bf16* u_s = p_s + 64 * kSC;

    // U' = U - W S and O = Qg S, rows 16 rw .., columns e0 ..
    float acc_u[NT][4], acc_o[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc_u[nt][r] = acc_o[nt][r] = 0.f;
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks) {
      uint32_t aw[4], aq[4];
      FragA<kLdsm>(aw, w_s + rw * 16 * kSK + ks * 16, kSK, lane);
      FragA<kLdsm>(aq, qg_s + rw * 16 * kSK + ks * 16, kSK, lane);
#pragma unroll
      for (int nt = 0; nt < NT; nt += kPair) {
        uint32_t bf[4];
        FragB<kPair>(bf, sT_s + (e0 + nt * 8) * kSK + ks * 16, kSK, lane);
#pragma unroll
        for (int j = 0; j < kPair; ++j) {
          Mma16816(acc_u[nt + j], aw, bf + 2 * j);
          Mma16816(acc_o[nt + j], aq, bf + 2 * j);
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = rw * 16 + group + 8 * (r >> 1);
        const int e = e0 + nt * 8 + 2 * tig + (r & 1);
        const float un = __bfloat162float(u_s[i * kSU + e]) - acc_u[nt][r];
        uT_s[e * kSC + i] = __float2bfloat16_rn(un);
      }
    __syncthreads();  // uT complete; every warp is done reading sT

    // O += P U'
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t ap[4];
      FragA<kLdsm>(ap, p_s + rw * 16 * kSC + ks * 16, kSC, lane);
#pragma unroll
      for (int nt = 0; nt < NT; nt += kPair) {
        uint32_t bf[4];
        FragB<kPair>(bf, uT_s + (e0 + nt * 8) * kSC + ks * 16, kSC, lane);
#pragma unroll
        for (int j = 0; j < kPair; ++j) Mma16816(acc_o[nt + j], ap, bf + 2 * j);
      }
    }
    const int chunk_t0 = seq_begin + (c - c_begin) * kChunk;
    const int L = min(kChunk, seq_end - chunk_t0);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = rw * 16 + group + 8 * half;
        if (i < L) {
          StoreOutPair(args.o, (chunk_t0 + i) * o_token + h * V + v0 + e0 + nt * 8 + 2 * tig,
                       args.io_dtype, acc_o[nt][2 * half], acc_o[nt][2 * half + 1]);
        }
      }

    // S = decay S + Kd^T U' (U''s fragments loaded once per k-step for all
    // of the warp's S rows; the interleaved mt chains hide mma latency).
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int r = 0; r < 4; ++r) S[mt][nt][r] *= decay;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t bf[NT / kPair][4];
#pragma unroll
      for (int nt = 0; nt < NT; nt += kPair) {
        FragB<kPair>(bf[nt / kPair], uT_s + (e0 + nt * 8) * kSC + ks * 16, kSC, lane);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        uint32_t ak[4];
        FragA<kLdsm>(ak, kdt_s + (rw * (K / 4) + mt * 16) * kSC + ks * 16, kSC, lane);
#pragma unroll
        for (int nt = 0; nt < NT; nt += kPair)
#pragma unroll
          for (int j = 0; j < kPair; ++j) Mma16816(S[mt][nt + j], ak, bf[nt / kPair] + 2 * j);
      }
    }
    // S^T in bf16 for the next chunk (its readers passed the barrier above).
    StoreStateTranspose<K>(sT_s, kSK, S, rw, e0, lane);
  }
  CpAsyncWaitAll();

  if (pages_ok) StoreFinalState<K, V>(args, n, h, v0, S, rw, e0, lane);
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_STATE_PASS_CUH_
