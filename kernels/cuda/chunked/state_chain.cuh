// Kernel 2 of the chunked prefill with the recurrence alone on its warps'
// serial chain,
//   U' = U - W S              [64, VT]   (rounded to Op, mma_16bit.cuh)
//   S  = exp(G_last) S + Kd^T U'
// and the output O = Qg S + P U' off that chain, in one of two ways:
//   split (kFused false, kernel 2 variant 4): per chunk the chain writes
//     hs [ch][V][K]   S^T at the chunk's start (Op, as the products see it)
//     un [ch][V][64]  U'^T (Op)
//   and kernel 3 (output_pass.cuh) computes o for every chunk in parallel,
//   as flash-linear-attention splits chunk_fwd_h from chunk_fwd_o;
//   fused (kFused true, variant 5): as many warps again compute O in the
//   same block from the S^T / U'^T tiles in shared memory, in step with the
//   chain (Qg S while the chain computes U', P U' while it updates S), so
//   nothing extra goes through memory and the two kinds of warps fill each
//   other's latency.
// Both forms: the same products, roundings and accumulation order at a given
// V tile (so the same bits); at V tiles 32 / 64 those of the earlier
// StatePassKernel (variants 1 - 3, o on the chain's own warps; git history).
// Loads (w, kdt, u; with kFused qg, p) run kStages - 1 chunks ahead in a
// ring of cp.async groups. Every tile is of the call's operand type Op.
//
// Block per (sequence, value head, V tile of VT columns), 4 * VT / WC chain
// warps: warp w = 4 cw + rw owns rows [16 rw, 16 rw + 16) of U', state rows
// [rw K / 4, (rw + 1) K / 4) and columns [cw WC, (cw + 1) WC) of the tile;
// the [K, VT] state tile lives in registers (fp32 mma accumulators). The o
// warps (kFused) own the same rows and columns of O. The chain warps store
// the tile to the final page, and after each checkpoint_interval tokens to
// that prefix state's page (ChunkArgs).
#ifndef GDN_KERNELS_CUDA_CHUNKED_STATE_CHAIN_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_STATE_CHAIN_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/mma_16bit.cuh"
#include "kernels/cuda/chunked/progress.cuh"
#include "kernels/cuda/chunked/state_tile.cuh"
#include "kernels/cuda/common/cp_async.cuh"
#include "kernels/cuda/common/pdl.cuh"
#include "kernels/gdn_params.h"

namespace gdn::cuda::chunked {

// Threads per block of StateChainKernel<..., VT, WC, kFused>: 4 VT / WC
// warps on the chain, as many again computing o with kFused.
template <int VT, int WC, bool kFused>
inline constexpr int kChainThreadsFor = 128 * (VT / WC) * (kFused ? 2 : 1);

static_assert(kChunk == kCheckpointTokens, "prefix states are written at chunk ends");

// Stages of the chain's load ring: 3 and 4 measured no faster than 2 on the
// H200 (bench/results/2026-12-01-prefill-v6.md: the chain is bound by its
// per-warp instruction latency, not by the loads).
inline constexpr int kChainStages = 2;

// Shared memory of StateChainKernel<K, V, VT, WC, kFused, Op>, in bytes: a
// ring of kStages stages of
//   w [64][K+8], kdt [K][72], u [64][VT+8], with kFused qg [64][K+8], p [64][72]
// then sT [VT][K+8] (S^T) and uT [VT][72] (U'^T), all Op (16-bit).
template <int K, int VT, bool kFused, int kStages = kChainStages>
struct ChainSmem {
  static constexpr int kStrideK = K + 8;
  static constexpr int kStrideC = 72;
  static constexpr int kStrideU = VT + 8;
  static constexpr int kStageElems = 64 * kStrideK + K * kStrideC + 64 * kStrideU +
                                     (kFused ? 64 * kStrideK + 64 * kStrideC : 0);
  static constexpr int kBytes = (kStages * kStageElems + VT * kStrideK + VT * kStrideC) * 2;
  // After kBytes, for int8 / fp8 pages only (the launch adds it then): the
  // chain warps' max |x| per column pair, [4 row warps][VT / 2] (state_tile.cuh).
  static constexpr int kQuantBytes = 4 * (VT / 2) * 4;
};

// rows x cols 16-bit elements (cols a multiple of 8) from shared memory (rows
// `sstride` apart) to contiguous global memory, 16 bytes per thread and step.
template <int kThreads, int kRows, int kCols, typename T>
__device__ __forceinline__ void StoreTileContiguous(T* gmem, const T* smem, int sstride) {
  constexpr int kPieces = kRows * kCols / 8;
#pragma unroll
  for (int i = 0; i < (kPieces + kThreads - 1) / kThreads; ++i) {
    const int p = threadIdx.x + i * kThreads;
    if (kPieces % kThreads == 0 || p < kPieces) {
      const int r = p / (kCols / 8), c = (p % (kCols / 8)) * 8;
      *reinterpret_cast<uint4*>(gmem + r * kCols + c) =
          *reinterpret_cast<const uint4*>(smem + r * sstride + c);
    }
  }
}

template <int K, int V, int VT, int WC, bool kFused, typename Op>
__global__ void __launch_bounds__(kChainThreadsFor<VT, WC, kFused>, 1)
    StateChainKernel(const ChunkArgs args) {
  constexpr int kStages = kChainStages;
  using Smem = ChainSmem<K, VT, kFused>;
  static_assert(kStages >= 2, "a stage in use and at least one in flight");
  constexpr int kThreads = kChainThreadsFor<VT, WC, kFused>;
  constexpr int kChainWarps = 4 * (VT / WC);
  constexpr int kSK = Smem::kStrideK, kSC = Smem::kStrideC, kSU = Smem::kStrideU;
  constexpr int kTiles = V / VT;
  static_assert((WC == 8 || WC == 16 || WC == 32) && VT % WC == 0, "warp layout");
  constexpr int MT = K / 64;  // 16-row tiles of S per warp
  constexpr int NT = WC / 8;  // 8-column tiles of a warp's columns
  constexpr int kPair = NT % 2 == 0 ? 2 : 1;  // n-tiles per B load
  if constexpr (!kFused) {
    // The output pass may start now (PDL): it waits on the progress flags.
    TriggerDependentLaunch();
  }
  extern __shared__ __align__(16) unsigned char smem[];
  Op* stage_base = reinterpret_cast<Op*>(smem);
  Op* sT_s = stage_base + kStages * Smem::kStageElems;
  Op* uT_s = sT_s + VT * kSK;
  uint32_t* amax_s = reinterpret_cast<uint32_t*>(smem + Smem::kBytes);  // int8 / fp8 only

  const int Hv = args.num_v_heads;
  const int vt = blockIdx.x % kTiles;
  const int h = (blockIdx.x / kTiles) % Hv;
  const int n = blockIdx.x / (kTiles * Hv);
  const int v0 = vt * VT;
  const int c_begin = args.chunk_table[n], c_end = args.chunk_table[n + 1];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // Warps [0, kChainWarps) carry the recurrence; with kFused the next
  // kChainWarps compute o, in the same layout over O's [64, VT].
  const bool is_chain = warp < kChainWarps;
  const int role_warp = is_chain ? warp : warp - kChainWarps;
  const int rw = role_warp & 3;          // row group
  const int e0 = (role_warp >> 2) * WC;  // first column of this warp in the tile

  const Op* w_g = reinterpret_cast<const Op*>(args.w);
  const Op* kdt_g = reinterpret_cast<const Op*>(args.kdt);
  const Op* u_g = reinterpret_cast<const Op*>(args.u);
  const Op* qg_g = reinterpret_cast<const Op*>(args.qg);
  const Op* p_g = reinterpret_cast<const Op*>(args.p);
  Op* hs_g = reinterpret_cast<Op*>(args.hs);
  Op* un_g = reinterpret_cast<Op*>(args.un);

  // Stage st: w, kdt, u, then with kFused qg, p.
  auto stage_ptr = [&](int st) { return stage_base + st * Smem::kStageElems; };
  auto issue_loads = [&](int c, int st) {
    const int64_t ch = static_cast<int64_t>(c) * Hv + h;
    Op* w_s = stage_ptr(st);
    Op* kdt_s = w_s + 64 * kSK;
    Op* u_s = kdt_s + K * kSC;
    CpAsyncTileStatic<kThreads, 64, K>(w_s, kSK, w_g + ch * 64 * K, K);
    CpAsyncTileStatic<kThreads, K, 64>(kdt_s, kSC, kdt_g + ch * K * 64, 64);
    CpAsyncTileStatic<kThreads, 64, VT>(u_s, kSU, u_g + ch * 64 * V + v0, V);
    if constexpr (kFused) {
      Op* qg_s = u_s + 64 * kSU;
      Op* p_s = qg_s + 64 * kSK;
      CpAsyncTileStatic<kThreads, 64, K>(qg_s, kSK, qg_g + ch * 64 * K, K);
      CpAsyncTileStatic<kThreads, 64, 64>(p_s, kSC, p_g + ch * 64 * 64, 64);
    }
  };

  // Page ids outside the pool: S is NaN, so is the sequence's o; no page is touched.
  const bool pages_ok = PagesOk(args, n);
  float S[MT][NT][4];
  if (is_chain) LoadInitialState<K, V>(S, sT_s, kSK, args, n, h, v0, rw, e0, lane, pages_ok);

  // The ring: chunk c_begin + i in stage i % kStages, kStages - 1 chunks
  // ahead; one commit group per chunk (empty past the end).
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (c_begin + i < c_end) issue_loads(c_begin + i, i);
    CopyAsyncCommit();
  }
  const int seq_begin = args.cu_seqlens[n], seq_end = args.cu_seqlens[n + 1];
  for (int c = c_begin; c < c_end; ++c) {
    const int st = (c - c_begin) % kStages;
    const int64_t ch = static_cast<int64_t>(c) * Hv + h;
    const float decay = is_chain ? args.decay[ch] : 0.f;
    CopyAsyncWait<kStages - 2>();
    // Stage st and sT landed; chunk c - 1 is done with its stage and uT.
    __syncthreads();
    const int ahead = c + kStages - 1;
    if (ahead < c_end) issue_loads(ahead, (ahead - c_begin) % kStages);
    CopyAsyncCommit();
    if constexpr (!kFused) {  // chunks c_begin .. c - 1: hs and un stored before the barrier
      const int done = c - c_begin;
      if (tid == 0 && done > 0 && done % kPublishEvery == 0) {
        PublishProgress(args.progress + blockIdx.x, args.epoch, done);
      }
    }

    const Op* w_s = stage_ptr(st);
    const Op* kdt_s = w_s + 64 * kSK;
    const Op* u_s = kdt_s + K * kSC;
    const Op* qg_s = u_s + 64 * kSU;  // kFused only
    const Op* p_s = qg_s + 64 * kSK;  // kFused only

    [[maybe_unused]] float acc_o[NT][4];  // kFused, o warps: O = Qg S + P U'
    if constexpr (!kFused) {
      // S^T of this chunk's start for the output pass: rows v0 .. v0 + VT of
      // hs[ch] ([V][K], so one contiguous VT x K span). Read before the
      // barrier below, after which the warps overwrite sT.
      StoreTileContiguous<kThreads, VT, K>(hs_g + (ch * V + v0) * K, sT_s, kSK);
    }
    if (is_chain) {
      // U' = U - W S, rows 16 rw .., columns e0 .. With one n-tile per warp
      // (V tile 16) the K / 16 k-steps alternate between two accumulators,
      // added at the end: two mma chains of half the length instead of one
      // (a different fp32 summation order than at V tiles 32 / 64, the same
      // in both forms).
      constexpr int kChains = NT == 1 ? 2 : 1;
      float acc_u[kChains][NT][4];
#pragma unroll
      for (int q = 0; q < kChains; ++q)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int r = 0; r < 4; ++r) acc_u[q][nt][r] = 0.f;
      MmaRowTile<K / 16>(acc_u[0], acc_u[kChains - 1], w_s + rw * 16 * kSK, kSK,
                         sT_s + e0 * kSK, kSK, lane);
      if constexpr (kChains == 2) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int r = 0; r < 4; ++r) acc_u[0][nt][r] += acc_u[1][nt][r];
      }
      // U in the accumulators' layout by ldmatrix, U' (Op) transposed into
      // uT by stmatrix.trans.
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        uint32_t uf[2];
        LdsmAcc16x8(uf, u_s + rw * 16 * kSU + e0 + nt * 8, kSU, lane);
        const float2 u0 = Unpack2<Op>(uf[0]), u1 = Unpack2<Op>(uf[1]);
        const uint32_t r[2] = {Pack2<Op>(u0.x - acc_u[0][nt][0], u0.y - acc_u[0][nt][1]),
                               Pack2<Op>(u1.x - acc_u[0][nt][2], u1.y - acc_u[0][nt][3])};
        StsmTrans16x8(uT_s + (e0 + nt * 8) * kSC + rw * 16, kSC, r, lane);
      }
    } else if constexpr (kFused) {
      // O = Qg S (the K / 16 k-steps first, then P U', as output_pass.cuh).
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc_o[nt][r] = 0.f;
      MmaRowTile<K / 16>(acc_o, acc_o, qg_s + rw * 16 * kSK, kSK, sT_s + e0 * kSK, kSK, lane);
    }
    __syncthreads();  // uT complete; every warp is done reading sT

    if constexpr (!kFused) {
      // U'^T for the output pass: rows v0 .. v0 + VT of un[ch] ([V][64]).
      StoreTileContiguous<kThreads, VT, 64>(un_g + (ch * V + v0) * 64, uT_s, kSC);
    }
    if (is_chain) {
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
          LdsmA(ak, kdt_s + (rw * (K / 4) + mt * 16) * kSC + ks * 16, kSC, lane);
#pragma unroll
          for (int nt = 0; nt < NT; nt += kPair)
#pragma unroll
            for (int j = 0; j < kPair; ++j) {
              Mma16816<Op>(S[mt][nt + j], ak, bf[nt / kPair] + 2 * j);
            }
        }
      }
      // S^T in Op for the next chunk (its readers passed the barrier above).
      StoreStateTranspose<K>(sT_s, kSK, S, rw, e0, lane);
      // A prefix state after this chunk (checkpoints are whole chunks, before
      // the sequence's last token).
      const int done = (c - c_begin + 1) * kChunk;
      if (args.checkpoint_interval > 0 && pages_ok && done % args.checkpoint_interval == 0 &&
          done < seq_end - seq_begin) {
        const int id = args.checkpoint_pages[n * args.checkpoints_per_seq +
                                             done / args.checkpoint_interval - 1];
        if (id != kZeroStatePage) {
          StoreStatePage<K, V, VT, MT, NT, kChainWarps * 32>(args, id, h, v0, S, rw, e0, lane,
                                                             amax_s, seq_begin + done - 1);
        }
      }
    } else if constexpr (kFused) {
      // O += P U', then o for the chunk's real tokens.
      MmaRowTile<4>(acc_o, acc_o, p_s + rw * 16 * kSC, kSC, uT_s + e0 * kSC, kSC, lane);
      const int chunk_t0 = seq_begin + (c - c_begin) * kChunk;
      StoreOutRows<V>(args, acc_o, chunk_t0, min(kChunk, seq_end - chunk_t0), h, v0 + e0, rw,
                      lane);
    }
  }
  CopyAsyncWaitAll();

  if (is_chain && pages_ok) {
    StoreStatePage<K, V, VT, MT, NT, kChainWarps * 32>(args, args.final_pages[n], h, v0, S, rw,
                                                       e0, lane, amax_s, seq_end - 1);
  }
  if constexpr (!kFused) {  // every chunk's hs / un and the final state
    __syncthreads();
    if (tid == 0) PublishProgress(args.progress + blockIdx.x, args.epoch, c_end - c_begin + 1);
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_STATE_CHAIN_CUH_
