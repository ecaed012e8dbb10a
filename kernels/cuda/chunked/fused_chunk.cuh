// FusedChunkKernel, form P (v8 chunked prefill, bench/prefill/HOPPER_DESIGN.md
// §4.1, §4.3, §5 step 2): one CTA per (sequence, value head) walks the
// sequence's 64-token chunks in order with the state S^T in registers, and
// reads the per-chunk factors T'' (hi + lo), P and the gate vectors that
// TPrep (tprep.cuh) wrote into the workspace (tprep_args.h) by TMA.
// K = V = 128, bf16 or fp16 inputs (Op = the input type), pages of any state
// dtype (int8 / fp8 with their column-pair scales, fused_chunk_tiles.cuh).
//
// ---- Roles (384 threads, three warpgroups) -----------------------------------
//   WG 0  producer (setmaxnreg 40): thread 0 issues every TMA load of a
//         chunk into a ring stage and arms its "full" barrier; the other
//         producer threads exit.
//   WG 1, 2  consumers (setmaxnreg 232): WG 1 + w owns V columns
//         [64 w, 64 w + 64), i.e. rows 64 w .. of S^T [V][K], as one
//         m64n128 fp32 accumulator (64 registers per thread; element i of
//         thread t is S^T(64 w + AccRow(t, i), AccCol(t, i)), wgmma.cuh).
// The two consumers never talk to each other (but with the aux warpgroup,
// where each forms half of P and of T'': named barrier 3 before step 3):
// each runs the whole chain on its 64 rows and releases a stage by arriving
// on its "empty" barrier.
//
// ---- The chain per chunk (tokens t0 .. t0 + L - 1; j, i token indices) -------
// With eg = e^G, ed = e^{G_last - G}, rq, rk (inverse norms), decay =
// e^{G_last} from TPrep (all 0 for padding tokens, decay per chunk):
//   1. X = S^T [K | Q]^T               m64n128k16 x 8, A = S^T in Op (registers),
//                                      B = the k and q tiles (K-major)
//   2. W'^T = V^T - (eg rk) o X_K      fp32; V^T by ldmatrix.trans
//      O^T  = (scale eg rq) o X_Q
//   3. U'^T = W'^T T''^T               m64n64k16 x 4 (hi) + x 4 (lo), A = W'^T
//                                      (kWHiLo: + x 4, W' in hi + lo as well)
//   4. S^T  = decay S^T                fp32
//      O^T += U'^T P^T                 m64n64k16 x 4, A = U'^T
//      S^T += (U'^T o (ed rk)) K       m64n128k16 x 4, A = decayed U'^T,
//                                      B = the k tile (MN-major)
//   5. O^T -> o rows < L (stmatrix.trans into a staging tile, 16-byte stores).
// State only (kWithO false: the span path's phase-1 runs, which keep end
// states alone): X = S^T K^T only (m64n64k16 x 8), no O^T, no step 5; the
// producer loads neither q nor P (Sm::TxBytes(false)).
// Padding tokens (j >= L) contribute nothing: T'' has zero rows and columns
// there (U' = 0 for them, and W' of a padding token never enters U'), P has
// zero columns, ed rk = 0; their o rows are not stored. Their q, k, v tiles
// may hold the next sequence's tokens (a box runs on) or TMA's zero fill
// (past the tensor): finite either way.
//
// Shared memory and the consumers' tile operations: fused_chunk_tiles.cuh;
// the producer's TMA loop: fused_chunk_loads.cuh.
#ifndef GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_CUH_

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/fused_chunk_aux.cuh"
#include "kernels/cuda/chunked/fused_chunk_loads.cuh"
#include "kernels/cuda/chunked/fused_chunk_tiles.cuh"
#include "kernels/cuda/chunked/mma_16bit.cuh"
#include "kernels/cuda/common/mbarrier.cuh"
#include "kernels/cuda/common/page_ids.cuh"
#include "kernels/cuda/common/tma.cuh"
#include "kernels/cuda/common/wgmma.cuh"
#include "kernels/gdn_types.h"

namespace gdn::cuda::chunked {

// Grid N * Hv (block = n * Hv + h), kFusedThreads threads,
// FusedChunkSmem::kBytes of dynamic shared memory. args: cu_seqlens,
// chunk_table (filled), initial / final pages, pool, o, num_* , group_size,
// scale, state_dtype; `decay` = the workspace's decay [ch], `rescaled` its
// tile flags [cq] (FixTileRows).
// kWHiLo: W' enters U' in Op hi + lo parts (12 k-steps instead of 8), see
// step 3 and FusedChunkOptions (fused_chunk.h). kWithO false: the state-only
// form above (args.o is not read). kQuantPages: int8 / fp8 pages (state or
// checkpoints) too; without it fp32 / bf16 pages only. The quantized load
// and stores are most of the kernel's code, and inlined into the chunk loop
// (a checkpoint store) they cost the fp32 / bf16 calls 3-7% (H100,
// 2026-12-05), so they live in instances of their own.
// kAuxPrep: a fourth warpgroup (fused_chunk_aux.cuh) forms rk and T in its
// scratch one chunk ahead of the consumers (who form T'' and P from them),
// from the gates, zeroed rows and rq that producer warps 1-3 put there
// (fused_chunk_aux_inputs.cuh; no TPrep: `decay` and `rescaled` are not
// read, the maps other than q, k, v unused); kFusedAuxThreads threads,
// FusedChunkSmem::kAuxBytes of shared memory.
template <typename In, bool kWHiLo, bool kWithO, bool kQuantPages, bool kAuxPrep = false>
__global__ void __launch_bounds__(kAuxPrep ? kFusedAuxThreads : kFusedThreads, 1)
    FusedChunkKernel(const __grid_constant__ FusedChunkMaps maps, const ChunkArgs args,
                     const float* __restrict__ decay, const int32_t* __restrict__ rescaled) {
  using Op = OperandFor<In>;
  static_assert(sizeof(Op) == 2 && sizeof(In) == 2, "16-bit inputs and operands");
  constexpr int K = 128, V = 128;
  using Sm = FusedChunkSmem;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint8_t* smem = AlignShared<1024>(smem_raw);
  __shared__ uint64_t full[kFusedStages];
  __shared__ uint64_t empty[kFusedStages];
  __shared__ uint64_t aux_ready[kFusedStages];  // kAuxPrep: the aux's 128 threads arrive
  // kAuxPrep: the producer's gate and row warps arrive (fused_chunk_aux_inputs.cuh).
  __shared__ uint64_t inputs_ready[kFusedStages];
  // kAuxPrep with o: the producer's row warps arrive once rq is in place.
  __shared__ uint64_t q_ready[kFusedStages];
  // kAuxPrep: every consumer thread arrives once it has read the aux's T.
  __shared__ uint64_t tf_free;
  // Per stage: the tile's `rescaled` flag, written by the producer before its
  // arrive on full[stage] (release), read by consumers after their wait.
  __shared__ int32_t stage_rescaled[kFusedStages];

  const int Hv = args.num_v_heads;
  const int n = blockIdx.x / Hv, h = blockIdx.x % Hv;
  const int hq = h / args.group_size;
  const int seq_t0 = args.cu_seqlens[n], seq_end = args.cu_seqlens[n + 1];
  const int c_first = args.chunk_table[n];
  const int num_chunks = args.chunk_table[n + 1] - c_first;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kFusedStages; ++s) {
      MbarrierInit(&full[s], 1);
      MbarrierInit(&empty[s], 256);  // every consumer thread releases
      MbarrierInit(&aux_ready[s], 128);
      MbarrierInit(&inputs_ready[s], kAuxInputArrivals);
      MbarrierInit(&q_ready[s], kAuxQReadyArrivals);
    }
    MbarrierInit(&tf_free, 256);
    FenceMbarrierInit();
  }
  __syncthreads();

  if (kAuxPrep && wg == 3) {
    // ---- aux ----------------------------------------------------------------------
    SetMaxNRegDecrease<kFusedAuxRegs>();
    AuxPrepLoop<Op, Sm::kQk, Sm::kGates, Sm::kStageBytes, kFusedStages>(
        args, smem, smem + Sm::kAux, full, inputs_ready, aux_ready, &tf_free, seq_t0, seq_end,
        num_chunks);
    return;
  }
  if (wg == 0) {
    // ---- producer ---------------------------------------------------------------
    SetMaxNRegDecrease<kAuxPrep ? kFusedAuxProducerRegs : kFusedProducerRegs>();
    if constexpr (kAuxPrep) {
      if (threadIdx.x >= 32 && threadIdx.x < 64) {
        AuxGateLoop(args, smem, Sm::kGates, Sm::kStageBytes, kFusedStages, empty, inputs_ready, h,
                    seq_t0, seq_end, num_chunks);
        return;
      }
      if (threadIdx.x >= 64) {
        AuxRowLoop<Op, kWithO>(args, smem, Sm::kQk, Sm::kGates, Sm::kStageBytes, kFusedStages,
                               full, inputs_ready, q_ready, seq_t0, seq_end, num_chunks);
        return;
      }
    }
    if (threadIdx.x == 0) {
      FusedLoadLoop<kWithO, kAuxPrep>(maps, args, smem, full, empty, stage_rescaled, rescaled, h,
                                      hq, c_first, seq_t0, num_chunks);
    }
    return;  // no CTA-wide barrier follows
  }

  // ---- consumers ------------------------------------------------------------------
  SetMaxNRegIncrease<kAuxPrep ? kFusedAuxConsumerRegs : kFusedConsumerRegs>();
  const int w = wg - 1;        // V columns 64 w ..
  const int t = threadIdx.x & 127;
  const int warp = t >> 5, lane = t & 31, q4 = lane & 3;
  const int row0 = 64 * w;
  const uint32_t base = SharedAddress32(smem);
  const uint32_t out_tile = base + Sm::kOut + 8192 * w;

  const int ip = args.initial_pages[n], fp = args.final_pages[n];
  // Initial, final and checkpoint page ids (state_pages.cuh): any unusable
  // id makes the state NaN (so o) and no page is written. (The span path's
  // phase 3: its checkpoint ids were checked by the fixup, span_fixup.h.)
  const bool pages_ok = args.spans_of_one_sequence ? EndPagesOk(args, n) : PagesOk(args, n);
  float s[64];
  LoadStateRows<K, V, kQuantPages>(s, args, ip, pages_ok, h, row0, t);

  for (int cc = 0; cc < num_chunks; ++cc) {
    const int stage = cc % kFusedStages;
    const uint32_t use = cc / kFusedStages;
    const int t0 = seq_t0 + cc * kChunk;
    const int L = min(kChunk, seq_end - t0);
    const int64_t ch = static_cast<int64_t>(c_first + cc) * Hv + h;
    const float chunk_decay_global = kAuxPrep ? 0.f : decay[ch];
    const uint32_t st = base + stage * Sm::kStageBytes;
    const float* gates =
        reinterpret_cast<const float*>(smem + stage * Sm::kStageBytes + Sm::kGates);
    MbarrierWait(&full[stage], use & 1);
    if constexpr (kAuxPrep) {
      // The rows and gates the producer's warps fixed and wrote (waited on
      // directly, not only through the aux's arrival), rq, then T'' and rk.
      MbarrierWait(&inputs_ready[stage], use & 1);
      if constexpr (kWithO) MbarrierWait(&q_ready[stage], use & 1);
      MbarrierWait(&aux_ready[stage], use & 1);
      StoreTPieces<Op>(reinterpret_cast<const float*>(smem + Sm::kAux + FusedAuxSmem::kTf),
                       gates + kAuxBeta, smem + stage * Sm::kStageBytes + Sm::kTHi,
                       smem + stage * Sm::kStageBytes + Sm::kTLo, 128 * w + t, &tf_free);
    } else if (stage_rescaled[stage] != 0 || L < kChunk) {
      FixTileRows<Op, kWithO>(smem + stage * Sm::kStageBytes, gates, L, w, t);
    }
    const float chunk_decay = kAuxPrep ? gates[256] : chunk_decay_global;

    // 1. X = S^T [K | Q]^T: columns 0-63 X_K, 64-127 X_Q (tokens); X_K
    // alone (B = the k rows of each block) without O.
    constexpr int kXCols = kWithO ? 128 : 64;
    float x[kXCols / 2];
#pragma unroll
    for (int i = 0; i < kXCols / 2; ++i) x[i] = 0.f;
    {
      uint32_t a[8][4];
#pragma unroll
      for (int kk = 0; kk < 8; ++kk) AccToFragmentA<Op>(s, kk, a[kk]);
      WgmmaFenceOperands(x);
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < 8; ++kk) {
        WgmmaFenceOperands(a[kk]);
        WgmmaRs<Op, kXCols, 0>(x, a[kk], DescKMajor(st + Sm::kQk + (kk / 4) * 16384, kk % 4),
                               kk > 0);
      }
      WgmmaCommitGroup();
      WgmmaWaitGroup<0>();
      WgmmaFenceOperands(x);
#pragma unroll
      for (int kk = 0; kk < 8; ++kk) WgmmaFenceOperands(a[kk]);
    }

    // With the aux: this warpgroup's half of P's Q K^T, issued here and
    // stored after step 2 (in step 1's batch, with a[] still live, ptxas
    // ran short of registers and serialised every wgmma of the kernel).
    float pc[kAuxPrep && kWithO ? 16 : 1];
    if constexpr (kAuxPrep && kWithO) IssuePHalf<Op>(pc, st + Sm::kQk, w);

    // 2. W'^T (x[0..31]) and O^T (x[32..63]) in fp32. Element i = 4 jb + 2 hh + e
    // is token j = 8 jb + 2 q4 + e; V^T's pair k = 2 jb + hh holds i = 2k, 2k + 1.
    {
      uint32_t vt[16];
#pragma unroll
      for (int p2 = 0; p2 < 4; ++p2) {
        uint32_t r[4];
        LdsmX4Trans(r, TransTileRow(st + Sm::kV + 8192 * w, p2, warp, lane));
#pragma unroll
        for (int e = 0; e < 4; ++e) vt[4 * p2 + e] = r[e];
      }
      const float scale = args.scale;
#pragma unroll
      for (int jb = 0; jb < 8; ++jb) {
        const int j = 8 * jb + 2 * q4;
        const float2 eg = *reinterpret_cast<const float2*>(gates + j);
        const float2 rq = *reinterpret_cast<const float2*>(gates + 128 + j);
        const float2 rk = *reinterpret_cast<const float2*>(gates + 192 + j);
        // |rq|, |rk|: negated for rescaled rows (FixTileRows).
        const float fk0 = eg.x * fabsf(rk.x), fk1 = eg.y * fabsf(rk.y);
        const float fq0 = scale * eg.x * fabsf(rq.x), fq1 = scale * eg.y * fabsf(rq.y);
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int i = 4 * jb + 2 * hh;
          const float2 vv = Unpack2<Op>(vt[2 * jb + hh]);
          x[i] = fmaf(-fk0, x[i], vv.x);
          x[i + 1] = fmaf(-fk1, x[i + 1], vv.y);
          if constexpr (kWithO) {
            x[32 + i] *= fq0;
            x[33 + i] *= fq1;
          }
        }
      }
    }

    if constexpr (kAuxPrep && kWithO) {
      StorePHalf<Op>(pc, w, warp, lane, smem + stage * Sm::kStageBytes + Sm::kP, gates,
                     args.scale);
    }

    // With the aux: both consumer warpgroups' halves of T'' and P are in place.
    if constexpr (kAuxPrep) ConsumersBarrier();

    // 3. U'^T = W'^T (T_hi + T_lo)^T; with kWHiLo, W' = W_hi + W_lo too:
    // W_hi T_hi + W_hi T_lo + W_lo T_hi (W_lo T_lo, ~2^-16 x 2^-16, dropped).
    float u[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) u[i] = 0.f;
    {
      uint32_t aw[4][4];
      uint32_t aw_lo[kWHiLo ? 4 : 1][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if constexpr (kWHiLo) {
          AccToFragmentAHiLo<Op>(x, kk, aw[kk], aw_lo[kk]);
        } else {
          AccToFragmentA<Op>(x, kk, aw[kk]);
        }
      }
      WgmmaFenceOperands(u);
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        WgmmaFenceOperands(aw[kk]);
        WgmmaRs<Op, 64, 0>(u, aw[kk], DescKMajor(st + Sm::kTHi, kk), kk > 0);
      }
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        WgmmaRs<Op, 64, 0>(u, aw[kk], DescKMajor(st + Sm::kTLo, kk), true);
      }
      if constexpr (kWHiLo) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          WgmmaFenceOperands(aw_lo[kk]);
          WgmmaRs<Op, 64, 0>(u, aw_lo[kk], DescKMajor(st + Sm::kTHi, kk), true);
        }
      }
      WgmmaCommitGroup();
      WgmmaWaitGroup<0>();
      WgmmaFenceOperands(u);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) WgmmaFenceOperands(aw[kk]);
      if constexpr (kWHiLo) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) WgmmaFenceOperands(aw_lo[kk]);
      }
    }

    // 4. S^T = decay S^T + (U'^T o (ed rk)) K and O^T += U'^T P^T, one batch.
    float o[kWithO ? 32 : 1];
    if constexpr (kWithO) {
#pragma unroll
      for (int i = 0; i < 32; ++i) o[i] = x[32 + i];
    }
    {
      float ud[32];
#pragma unroll
      for (int jb = 0; jb < 8; ++jb) {
        const int j = 8 * jb + 2 * q4;
        const float2 ed = *reinterpret_cast<const float2*>(gates + 64 + j);
        const float2 rk = *reinterpret_cast<const float2*>(gates + 192 + j);
        const float f0 = ed.x * fabsf(rk.x), f1 = ed.y * fabsf(rk.y);
        ud[4 * jb + 0] = u[4 * jb + 0] * f0;
        ud[4 * jb + 1] = u[4 * jb + 1] * f1;
        ud[4 * jb + 2] = u[4 * jb + 2] * f0;
        ud[4 * jb + 3] = u[4 * jb + 3] * f1;
      }
      uint32_t au[4][4], ad[4][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if constexpr (kWithO) AccToFragmentA<Op>(u, kk, au[kk]);
        AccToFragmentA<Op>(ud, kk, ad[kk]);
      }
#pragma unroll
      for (int i = 0; i < 64; ++i) s[i] *= chunk_decay;
      if constexpr (kWithO) WgmmaFenceOperands(o);
      WgmmaFenceOperands(s);
      WgmmaFence();
      if constexpr (kWithO) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          WgmmaFenceOperands(au[kk]);
          WgmmaRs<Op, 64, 0>(o, au[kk], DescKMajor(st + Sm::kP, kk), true);
        }
      }
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        WgmmaFenceOperands(ad[kk]);
        // B = the k tile MN-major: K rows = 16 tokens per k-step (2048 B),
        // N = K columns in two 64-wide blocks 16 KB apart (q between them).
        WgmmaRs<Op, 128, 1>(s, ad[kk], WgmmaDescSw128MnMajor(st + Sm::kQk + 2048 * kk, 16384),
                            true);
      }
      WgmmaCommitGroup();
      WgmmaWaitGroup<0>();
      if constexpr (kWithO) WgmmaFenceOperands(o);
      WgmmaFenceOperands(s);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if constexpr (kWithO) WgmmaFenceOperands(au[kk]);
        WgmmaFenceOperands(ad[kk]);
      }
    }
    MbarrierArrive(&empty[stage]);  // this thread's reads of the stage are done

    // A prefix state after this chunk: at multiples of the checkpoint
    // interval (a multiple of kChunk, FusedChunkSupports) before the
    // sequence's last token, into its slot unless the slot is
    // kZeroStatePage (GdnParams::checkpoint_interval; a span of the span
    // path's phase 3 stores at its end too, into the whole sequence's slot:
    // CheckpointSlotsOf).
    const int done = (cc + 1) * kChunk;
    if (args.checkpoint_interval > 0 && pages_ok && done % args.checkpoint_interval == 0) {
      const CheckpointSlots slots = CheckpointSlotsOf(args, n);  // here: no live registers
      const int id = done < slots.limit
                         ? args.checkpoint_pages[slots.first + done / args.checkpoint_interval - 1]
                         : kZeroStatePage;
      if (id != kZeroStatePage) {
        StoreStateRows<K, V, kQuantPages>(
            s, args, args.checkpoint_pool_base + id * args.checkpoint_page_bytes,
            args.checkpoint_dtype, h, row0, t, seq_t0 + done - 1);
      }
    }

    // 5. O^T -> staging tile [64 tokens][64 columns] (SW128) -> o rows < L.
    if constexpr (kWithO) {
      ConsumerBarrier(w);  // the previous chunk's rows have been read
#pragma unroll
      for (int p2 = 0; p2 < 4; ++p2) {
        const uint32_t r[4] = {PackPair<Op>(o[8 * p2 + 0], o[8 * p2 + 1]),
                               PackPair<Op>(o[8 * p2 + 2], o[8 * p2 + 3]),
                               PackPair<Op>(o[8 * p2 + 4], o[8 * p2 + 5]),
                               PackPair<Op>(o[8 * p2 + 6], o[8 * p2 + 7])};
        StsmX4Trans(TransTileRow(out_tile, p2, warp, lane), r);
      }
      ConsumerBarrier(w);
      In* o_base = static_cast<In*>(args.o) + static_cast<int64_t>(h) * V + row0;
#pragma unroll
      for (int part = 0; part < 4; ++part) {
        const int piece = t + 128 * part;
        const int i = piece >> 3, c16 = piece & 7;
        if (i < L && args.o != nullptr) {  // null o with kWHiLo off: no o stored
          const uint4 val = *reinterpret_cast<const uint4*>(smem + Sm::kOut + 8192 * w +
                                                            i * 128 + ((c16 ^ (i & 7)) << 4));
          *reinterpret_cast<uint4*>(o_base + static_cast<int64_t>(t0 + i) * Hv * V + 8 * c16) =
              val;
        }
      }
    }
  }

  // The last token's gates salt a stochastic int8 / fp8 store (every
  // sequence has a token: ValidateParams).
  if (pages_ok) {
    StoreStateRows<K, V, kQuantPages>(
        s, args, args.pool_base + static_cast<int64_t>(fp) * args.page_bytes, args.state_dtype,
        h, row0, t, seq_end - 1);
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_CUH_
