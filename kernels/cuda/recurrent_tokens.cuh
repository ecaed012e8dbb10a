// The token loop of the recurrent GDN kernels (device code): a block owns
// one (sequence, value head, V tile) item at a time, its [K, VT] state tile
// in registers for all of the sequence's tokens.
//
// Per token (shared/GDN.md), with the decayed old state D = exp(g) S:
//   u   = beta (v - D^T k)
//   o   = D^T (scale q) + (k . scale q) u        (= S_new^T (scale q))
//   S'  = D + k u^T
// so D^T k and D^T q come out of ONE reduction over K per token, computed
// from the old state: sum_K S[k][c] * k[k] times exp(g).
//
// This file: the token loop shared by the one-block-per-item and the
// persistent kernels (StageTokens, RunItemTokens) and the tile's store
// (StoreTile); the thread layout is recurrent_shape.cuh's.
#ifndef GDN_KERNELS_CUDA_RECURRENT_TOKENS_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_TOKENS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/vector_access.cuh"
#include "kernels/cuda/recurrent_item.cuh"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/cuda/recurrent_quant.cuh"
#include "kernels/cuda/recurrent_quant_token.cuh"
#include "kernels/cuda/recurrent_shape.cuh"
#include "kernels/gating.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda {

// Stages tokens [tok0, tok0 + n) of one (sequence, head) into shared memory:
// warp w handles the q / k rows of tokens w, w + kWarps, ...; lane t of the
// last warp the gates of token t; the block's threads together load the v
// tile. The caller synchronises afterwards.
//
// q and k rows: fp32 / bf16 states get them normalised (q times scale) and
// k . q of the normalised rows. int8 / fp8 states get the rows as loaded
// (after the rare rescale below), raw k . q and the arguments of the two
// rsqrt factors, q . q + eps and k . k + eps: the token step applies the
// factors to its reduced sums (recurrent_quant_token.cuh). Why: in a decode
// item the other warps wait at the barrier after this staging, and the two
// correctly rounded sqrt + division chains and the row scaling were half of
// the staging warp's dependent work after its loads.
template <typename Shape>
__device__ __forceinline__ void StageTokens(const RecurrentParams& p,
                                            RecurrentSmem<Shape>& smem,
                                            int tok0, int n, int head,
                                            int qk_head, int col0) {
  using InT = typename Shape::InT;
  constexpr int kPer = Shape::kQkPerLane;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int Hv = p.num_v_heads;
  for (int t = warp; t < n; t += Shape::kWarps) {
    const int64_t tok = tok0 + t;
    const int64_t qk_offset = (tok * p.num_qk_heads + qk_head) * Shape::kK + lane * kPer;
    float q[kPer], k[kPer];
    LoadAsFloats<InT, kPer>(static_cast<const InT*>(p.q) + qk_offset, q);
    LoadAsFloats<InT, kPer>(static_cast<const InT*>(p.k) + qk_offset, k);
    float qq = 0.0f, kk = 0.0f, kq = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      qq += q[i] * q[i];
      kk += k[i] * k[i];
      kq += k[i] * q[i];
    }
#pragma unroll
    for (int offset = 16; offset >= 1; offset /= 2) {
      qq += __shfl_xor_sync(0xffffffffu, qq, offset);
      kk += __shfl_xor_sync(0xffffffffu, kk, offset);
      kq += __shfl_xor_sync(0xffffffffu, kq, offset);
    }
    float q_factor = p.scale, k_factor = 1.0f;
    float q_eps = kL2NormEps, k_eps = kL2NormEps;
    if (p.l2_norm_qk) {
      // Rare: a row with max|x| >= ~2^60 overflowed its sum of squares; it
      // is rescaled by kL2NormRescale (gdn_types.h) and the sums redone. The
      // butterfly leaves bitwise equal sums on every lane: a uniform branch.
      if (!isfinite(qq) || !isfinite(kk)) {
        const float cq = isfinite(qq) ? 1.0f : kL2NormRescale;
        const float ck = isfinite(kk) ? 1.0f : kL2NormRescale;
        if (cq != 1.0f) q_eps = 0.0f;  // 2^-200 below the rescaled sum
        if (ck != 1.0f) k_eps = 0.0f;
        qq = kk = kq = 0.0f;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          q[i] *= cq;
          k[i] *= ck;
          qq += q[i] * q[i];
          kk += k[i] * k[i];
          kq += k[i] * q[i];
        }
#pragma unroll
        for (int offset = 16; offset >= 1; offset /= 2) {
          qq += __shfl_xor_sync(0xffffffffu, qq, offset);
          kk += __shfl_xor_sync(0xffffffffu, kk, offset);
          kq += __shfl_xor_sync(0xffffffffu, kq, offset);
        }
      }
      if constexpr (!RecurrentSmem<Shape>::kQuant) {
        const float rq = 1.0f / sqrtf(qq + q_eps);
        const float rk = 1.0f / sqrtf(kk + k_eps);
        q_factor *= rq;
        k_factor = rk;
      }
    }
    if constexpr (RecurrentSmem<Shape>::kQuant) {
      // Raw rows: |x| < 2^64 after the rescale, so the token step's sums of
      // state times row stay finite for any state below ~2^57.
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        smem.q[t][lane * kPer + i] = q[i];
        smem.k[t][lane * kPer + i] = k[i];
      }
      if (lane == 0) {
        smem.kq[t] = kq;
        smem.qq[t] = qq + q_eps;
        smem.kk[t] = kk + k_eps;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        smem.q[t][lane * kPer + i] = q[i] * q_factor;
        smem.k[t][lane * kPer + i] = k[i] * k_factor;
      }
      if (lane == 0) smem.kq[t] = kq * q_factor * k_factor;
    }
  }
  // Gates: lane t of the last warp computes token t's, all tokens at once
  // and off the q / k staging warps (for a decode token: warp 0 stages q / k
  // while warp kWarps - 1 loads the gates; the fused gating's softplus and
  // sigmoid were a serial chain of one lane of the staging warp).
  static_assert(kTokensPerChunk <= 32, "one lane per staged token");
  if (warp == Shape::kWarps - 1 && lane < n) {
    const int64_t gi = (int64_t)(tok0 + lane) * Hv + head;
    float gate_g, gate_beta;
    if (p.fused_gating) {
      gate_g = FusedDecay(p.a[gi], p.A_log[head], p.dt_bias[head]);
      gate_beta = FusedBeta(p.b[gi]);
    } else {
      gate_g = p.g[gi];
      gate_beta = p.beta[gi];
    }
    smem.decay[lane] = expf(gate_g);
    smem.beta[lane] = gate_beta;
  }
  // v: thread i stages column i % kVTile of tokens P - 1 - i / kVTile,
  // 2 P - 1 - i / kVTile, ... with P = kThreads / kVTile tokens per pass (a
  // rolled loop: one pass for a decode token). The last threads take the
  // first tokens: a decode token's v row comes from the last warps, not from
  // warp 0, which stages its q / k rows (one global round trip fewer on the
  // path to the barrier after the staging).
  static_assert(Shape::kThreads % Shape::kVTile == 0, "whole v tile rows per pass");
  constexpr int kTokensPerPass = Shape::kThreads / Shape::kVTile;
  const int c = threadIdx.x % Shape::kVTile;
  const InT* v = static_cast<const InT*>(p.v) + (int64_t)head * Shape::kV + col0 + c;
#pragma unroll 1
  for (int t = kTokensPerPass - 1 - threadIdx.x / Shape::kVTile; t < n; t += kTokensPerPass) {
    smem.v[t][c] = ToFloat(v[(int64_t)(tok0 + t) * Hv * Shape::kV]);
  }
}

// The state tile in registers (this thread's rows) into page `page`;
// last_token: the last token the state has seen (int8 / fp8 rounding salt).
// int8 / fp8: `final` picks the amax buffer, since the store has no barrier
// before its amax writes: a prefix-state store may be followed at once by
// the final store, but two stores into one buffer are always separated by
// a block barrier (a token step's, for prefix states; the next item's
// staging barrier, for final stores).
template <typename Shape>
__device__ __forceinline__ void StoreTile(const RecurrentParams& p, RecurrentSmem<Shape>& smem,
                                          const RecurrentItem& it, int page,
                                          const float (&s)[Shape::kRowsPerThread][Shape::kCols],
                                          int64_t last_token, bool final) {
  using StateT = typename Shape::StateT;
  if constexpr (kQuantState<StateT>) {
    StoreQuantTile<Shape>(p, &smem.amax[final ? 0 : 1][0][0], it.head, it.col0, page, s,
                          last_token);
  } else {
    StateT* dst = reinterpret_cast<StateT*>(p.pool_base + (int64_t)page * p.page_bytes) +
                  ThreadTileOffset<Shape>(it);
#pragma unroll
    for (int r = 0; r < Shape::kRowsPerThread; ++r) {
      StoreStreaming<uint4>(dst + (int64_t)r * Shape::kRowGroups * Shape::kV,
                           PackState<StateT, Shape::kCols>(s[r]));
    }
  }
}

// Runs every token of one item over the state tile in registers `s`, then
// stores the tile to the final page (and, every checkpoint_interval tokens,
// to the prefix-state pages). Expects the item's first chunk staged
// (StageTokens) and a __syncthreads since; `buffer` is the reduction
// buffer parity, carried across items.
template <typename Shape>
__device__ __forceinline__ void RunItemTokens(const RecurrentParams& p,
                                              RecurrentSmem<Shape>& smem,
                                              const RecurrentItem& it,
                                              float (&s)[Shape::kRowsPerThread][Shape::kCols],
                                              int& buffer) {
  using InT = typename Shape::InT;
  constexpr int kCols = Shape::kCols;
  constexpr int kRows = Shape::kRowsPerThread;
  constexpr int kRowGroups = Shape::kRowGroups;
  constexpr int kThreadsPerRow = Shape::kThreadsPerRow;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int col_group = threadIdx.x % kThreadsPerRow;  // which 16-byte vector
  const int row_group = threadIdx.x / kThreadsPerRow;  // rows r * kRowGroups + row_group
  const int my_col = it.col0 + col_group * kCols;

  InT* o = static_cast<InT*>(p.o);
  int n = min(it.eos - it.bos, kTokensPerChunk);
  // Per-token states (kPerTokenStates: speculative drafts of at most
  // kTokensPerChunk tokens) split a chunk into runs of one token, so the one
  // prefix-state store below serves both kinds; other calls run each chunk
  // as one run, as before.
  const int run_length = p.checkpoint_interval == kPerTokenStates ? 1 : kTokensPerChunk;
  int chunk_start = it.bos;
  for (int t = 0;;) {
    const int run_end = min(n, t + run_length);
    for (; t < run_end; ++t) {
      if constexpr (kQuantState<typename Shape::StateT>) {
        // s holds the decayed state for the item's first token (the kernels
        // fold exp(g_0) into the scales).
        QuantTokenStep<Shape>(p, smem, it.head, it.col0, it.pages_ok, t, chunk_start + t,
                              chunk_start + t == it.bos, s);
        continue;
      }
      const float decay = smem.decay[t];
      float dk[kCols], dq[kCols];  // partial S^T k, S^T q over my rows
#pragma unroll
      for (int c = 0; c < kCols; ++c) dk[c] = dq[c] = 0.0f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float kr = smem.k[t][r * kRowGroups + row_group];
        const float qr = smem.q[t][r * kRowGroups + row_group];
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          dk[c] = fmaf(s[r][c], kr, dk[c]);
          dq[c] = fmaf(s[r][c], qr, dq[c]);
        }
      }
      // Row groups inside a warp: lanes kThreadsPerRow apart.
#pragma unroll
      for (int offset = kThreadsPerRow; offset < 32; offset *= 2) {
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          dk[c] += __shfl_xor_sync(0xffffffffu, dk[c], offset);
          dq[c] += __shfl_xor_sync(0xffffffffu, dq[c], offset);
        }
      }
      if (lane < kThreadsPerRow) {
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          smem.partial[buffer][warp][0][col_group * kCols + c] = dk[c];
          smem.partial[buffer][warp][1][col_group * kCols + c] = dq[c];
        }
      }
      __syncthreads();
      float sk[kCols], sq[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) sk[c] = sq[c] = 0.0f;
#pragma unroll
      for (int w = 0; w < Shape::kWarps; ++w) {
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          sk[c] += smem.partial[buffer][w][0][col_group * kCols + c];
          sq[c] += smem.partial[buffer][w][1][col_group * kCols + c];
        }
      }
      buffer ^= 1;

      const float beta = smem.beta[t];
      const float kq = smem.kq[t];
      float u[kCols], out[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        u[c] = beta * (smem.v[t][col_group * kCols + c] - decay * sk[c]);
        out[c] = fmaf(decay, sq[c], kq * u[c]);
      }
      if (row_group == 0) {
        InT* dst =
            o + ((int64_t)(chunk_start + t) * p.num_v_heads + it.head) * Shape::kV + my_col;
        if (!it.pages_ok) {
#pragma unroll
          for (int c = 0; c < kCols; ++c) out[c] = __int_as_float(0x7fc00000);
        }
        StoreFromFloats<InT, kCols>(dst, out);
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float kr = smem.k[t][r * kRowGroups + row_group];
#pragma unroll
        for (int c = 0; c < kCols; ++c) s[r][c] = fmaf(s[r][c], decay, kr * u[c]);
      }
    }
    // After each run, and at once for an item without tokens: the final
    // state at the item's end, else a prefix state where one is asked for
    // (kTokensPerChunk divides kCheckpointTokens, so every multiple of a
    // larger interval ends a chunk; a multiple before the end is within the
    // sequence's CheckpointCount). One StoreTile call site for both kinds:
    // the int8 / fp8 store is inlined once, and none of its addresses stay
    // live across the token loop.
    const int done = chunk_start + t - it.bos;
    const bool end = chunk_start + t == it.eos;
    bool store = end && it.pages_ok;
    int page = it.final_page;
    if (!end && p.checkpoint_interval > 0 && it.pages_ok && done % p.checkpoint_interval == 0) {
      page = p.checkpoint_pages[it.seq * p.checkpoints_per_seq + done / p.checkpoint_interval - 1];
      store = page != kZeroStatePage;
    }
    if (store) StoreTile<Shape>(p, smem, it, page, s, chunk_start + t - 1, end);
    if (end) break;
    if (t == n) {  // prefill: stage the next chunk
      chunk_start += n;
      __syncthreads();  // everyone is done reading this chunk
      n = min(it.eos - chunk_start, kTokensPerChunk);
      StageTokens<Shape>(p, smem, chunk_start, n, it.head, it.qk_head, it.col0);
      __syncthreads();
      t = 0;
    }
  }
}
}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_TOKENS_CUH_
