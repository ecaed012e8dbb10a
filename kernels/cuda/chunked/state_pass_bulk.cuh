// Kernel 2 of the chunked prefill, second version: the sequential pass over a
// sequence's chunks with the workspace tiles brought in by bulk copies (TMA,
// 1-D) and, optionally, multicast to the V-tile blocks of one head.
//
// One block per (sequence, value head, V tile of VT columns), 4 * VT / WC
// warps; warp w = 4 cw + rw owns rows [16 rw, 16 rw + 16) of U' and O, state
// rows [rw K / 4, (rw + 1) K / 4) and columns [cw WC, (cw + 1) WC) of the
// tile. Per chunk, with the tiles kernel 1 left in the workspace
// (chunk_args.h):
//   U' = U - W S              [64, VT]   (rounded to bf16)
//   O  = Qg S + P U'          [64, VT]   -> o
//   S  = exp(G_last) S + Kd^T U'         (fp32 mma accumulators in registers)
// S and U' enter the products as bf16, fp32 accumulation: the same roundings
// and the same order of every accumulation as state_pass.cuh (version 1), so
// both give bitwise the same o and states.
//
// What changed from version 1 (ncu, bench/results/2026-12-01-prefill-v5.md):
// v1 issued ~1370 instructions per warp per chunk for 112 mma (cp.async
// address loops, scalar fragment loads, transposed scalar stores of S and U')
// with one warp per scheduler, so it was issue-latency bound (IPC 1.2); and
// the V / VT blocks of a head each read the same W, Qg, Kd, P tiles from L2
// (59% of L2 throughput at 16/32 1 x 32768). Here:
//   - tiles arrive by one bulk copy per row (~3 per thread per chunk) into a
//     ring of kStages stages completed by mbarriers (transaction bytes);
//   - S and U' are kept row-major ([K][VT], [64][VT]: the accumulators' own
//     layout, 32-bit stores) and read as B operands by ldmatrix.trans; every
//     A operand by ldmatrix;
//   - kMulticast: the V / VT blocks of a head form a thread-block cluster;
//     each issues 1 / (V / VT) of the shared rows (W, Qg, Kd, P) multicast to
//     all of them, so each row leaves L2 once per head instead of V / VT
//     times. A cluster barrier per chunk tells the issuers that every block
//     finished reading the stage they refill.
//
// Shared memory: kStages x {w [64][K+8], qg [64][K+8], kdt [K][72],
// p [64][72], u [64][VT+8]}, then S [K][VT+8] and U' [64][VT+8] (bf16), then
// the stages' mbarriers. Row strides of (multiple of 64) + 8 elements keep
// ldmatrix and the 32-bit stores conflict-free.
#ifndef GDN_KERNELS_CUDA_CHUNKED_STATE_PASS_BULK_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_STATE_PASS_BULK_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/bulk_copy.cuh"
#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/mma_bf16.cuh"
#include "kernels/gdn_params.h"

namespace gdn::cuda::chunked {

inline constexpr int kMaxSharedBytesPerBlock = 227 * 1024;  // sm_90

template <int VT, int WC>
inline constexpr int kBulkStateThreads = 128 * (VT / WC);

template <int K, int VT>
struct BulkStateSmem {
  static constexpr int kSK = K + 8;   // w, qg rows
  static constexpr int kSC = 72;      // kdt, p rows (64 tokens)
  static constexpr int kSV = VT + 8;  // u, U', S rows
  // Offsets (elements) inside a stage.
  static constexpr int kW = 0;
  static constexpr int kQg = 64 * kSK;
  static constexpr int kKdt = 128 * kSK;
  static constexpr int kP = kKdt + K * kSC;
  static constexpr int kU = kP + 64 * kSC;
  static constexpr int kStageElems = kU + 64 * kSV;
  static constexpr int kFixedElems = K * kSV + 64 * kSV;  // S, U'
  static constexpr int BytesFor(int stages) {
    return (stages * kStageElems + kFixedElems) * 2 + stages * 8;
  }
  // Three stages (two chunks of look-ahead) where they fit, else two.
  static constexpr int kStages = BytesFor(3) <= kMaxSharedBytesPerBlock ? 3 : 2;
  static constexpr int kBytes = BytesFor(kStages);
  // Rows of the tiles every V tile of a head shares: w 64, qg 64, kdt K, p 64.
  static constexpr int kSharedRows = 192 + K;
  // Bytes landing in one stage of one block.
  static constexpr uint32_t kStageTx = (2 * 64 * K + K * 64 + 64 * 64 + 64 * VT) * 2;
};

// o [.., 2] at `p` in the call's input dtype.
__device__ __forceinline__ void StoreOutPair(void* o, int64_t at, DType dtype, float x0,
                                             float x1) {
  if (dtype == DType::kBF16) {
    StorePair(static_cast<bf16*>(o) + at, x0, x1);
  } else if (dtype == DType::kF16) {
    StorePair(static_cast<__half*>(o) + at, x0, x1);
  } else {
    StorePair(static_cast<float*>(o) + at, x0, x1);
  }
}

template <int K, int V, int VT, int WC, bool kMulticast>
__global__ void __launch_bounds__(kBulkStateThreads<VT, WC>, 1)
    StatePassBulkKernel(const ChunkArgs args) {
  using Smem = BulkStateSmem<K, VT>;
  constexpr int kThreads = kBulkStateThreads<VT, WC>;
  constexpr int kStages = Smem::kStages;
  constexpr int kSK = Smem::kSK, kSC = Smem::kSC, kSV = Smem::kSV;
  constexpr int kTiles = V / VT;  // blocks per (sequence, head); the cluster
  constexpr int kRanks = kMulticast ? kTiles : 1;
  constexpr int kRowsPerRank = Smem::kSharedRows / kRanks;
  constexpr int MT = K / 64;  // 16-row tiles of S per warp
  constexpr int NT = WC / 8;  // 8-column tiles of a warp's columns
  static_assert(WC == 16 || WC == 32, "B fragments come in pairs of n-tiles");
  static_assert(VT % WC == 0 && Smem::kSharedRows % kRanks == 0, "layout");
  static_assert(kRanks <= 8, "portable cluster size");
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* stage_base = reinterpret_cast<bf16*>(smem);
  bf16* s_s = stage_base + kStages * Smem::kStageElems;  // S  [K][kSV]
  bf16* un_s = s_s + K * kSV;                            // U' [64][kSV]
  uint64_t* full = reinterpret_cast<uint64_t*>(un_s + 64 * kSV);

  const int Hv = args.num_v_heads;
  const int vt = blockIdx.x % kTiles;
  const int h = (blockIdx.x / kTiles) % Hv;
  const int n = blockIdx.x / (kTiles * Hv);
  const int v0 = vt * VT;
  const int c_begin = args.chunk_table[n], c_end = args.chunk_table[n + 1];
  const int num = c_end - c_begin;
  const int seq_begin = args.cu_seqlens[n], seq_end = args.cu_seqlens[n + 1];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int group = lane >> 2, tig = lane & 3;
  const int rw = warp & 3;          // row group
  const int e0 = (warp >> 2) * WC;  // first column of this warp in the tile

  // Stage s's barrier announces its bytes (its one arrival) as soon as the
  // stage's previous fill was consumed, before any copy into it can land:
  // here for chunks 0 .. kStages - 1, in the loop for chunk i + kStages.
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      MbarInit(&full[s], 1);
      if (s < num) MbarArriveExpectTx(&full[s], Smem::kStageTx);
    }
    FenceMbarInit();
  }
  if constexpr (kMulticast) {
    ClusterArrive();  // every block's barriers exist before anyone multicasts
    ClusterWait();
  } else {
    __syncthreads();
  }

  const bf16* w_g = reinterpret_cast<const bf16*>(args.w);
  const bf16* qg_g = reinterpret_cast<const bf16*>(args.qg);
  const bf16* kdt_g = reinterpret_cast<const bf16*>(args.kdt);
  const bf16* p_g = reinterpret_cast<const bf16*>(args.p);
  const bf16* u_g = reinterpret_cast<const bf16*>(args.u);
  const int rank = kMulticast ? static_cast<int>(ClusterRank()) : 0;  // == vt

  // Chunk c into stage st: this block's share of the shared rows (multicast
  // to the cluster, or all of them) and its own u tile.
  auto issue = [&](int c, int st) {
    bf16* base = stage_base + st * Smem::kStageElems;
    uint64_t* bar = &full[st];
    const int64_t ch = static_cast<int64_t>(c) * Hv + h;
    for (int j = tid; j < kRowsPerRank + 64; j += kThreads) {
      if (j < kRowsPerRank) {
        const int row = rank * kRowsPerRank + j;
        const bf16* src;
        bf16* dst;
        uint32_t bytes = 64 * 2;
        if (row < 64) {
          src = w_g + (ch * 64 + row) * K, dst = base + Smem::kW + row * kSK, bytes = K * 2;
        } else if (row < 128) {
          const int r = row - 64;
          src = qg_g + (ch * 64 + r) * K, dst = base + Smem::kQg + r * kSK, bytes = K * 2;
        } else if (row < 128 + K) {
          const int r = row - 128;
          src = kdt_g + (ch * K + r) * 64, dst = base + Smem::kKdt + r * kSC;
        } else {
          const int r = row - 128 - K;
          src = p_g + (ch * 64 + r) * 64, dst = base + Smem::kP + r * kSC;
        }
        if constexpr (kMulticast) {
          BulkCopyG2SMulticast(dst, src, bytes, bar, static_cast<uint16_t>((1u << kTiles) - 1));
        } else {
          BulkCopyG2S(dst, src, bytes, bar);
        }
      } else {
        const int r = j - kRowsPerRank;
        BulkCopyG2S(base + Smem::kU + r * kSV, u_g + (ch * 64 + r) * V + v0, VT * 2, bar);
      }
    }
  };

  // Page ids outside the pool: the sequence's o becomes NaN, no page is touched.
  const int ip = args.initial_pages[n], fp = args.final_pages[n];
  const bool pages_ok = (ip == kZeroStatePage || (ip >= 0 && ip < args.num_pages)) &&
                        fp >= 0 && fp < args.num_pages;
  const int64_t tile_offset = static_cast<int64_t>(h) * K * V + v0;  // in the page
  const bool f32_state = args.state_dtype == StateDType::kF32;

  for (int i = 0; i < kStages - 1 && i < num; ++i) issue(c_begin + i, i);

  float S[MT][NT][4];
  {
    const char* init = nullptr;
    if (pages_ok && ip != kZeroStatePage) init = args.pool_base + ip * args.page_bytes;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int d = rw * (K / 4) + mt * 16 + group + 8 * half;
          const int e = e0 + nt * 8 + 2 * tig;
          float x0 = 0.f, x1 = 0.f;
          if (!pages_ok) {
            x0 = x1 = __int_as_float(0x7fc00000);  // NaN
          } else if (init != nullptr) {
            const int64_t at = tile_offset + d * V + e;
            if (f32_state) {
              const float2 x = *reinterpret_cast<const float2*>(
                  reinterpret_cast<const float*>(init) + at);
              x0 = x.x, x1 = x.y;
            } else {
              const __nv_bfloat162 x = *reinterpret_cast<const __nv_bfloat162*>(
                  reinterpret_cast<const bf16*>(init) + at);
              x0 = __low2float(x), x1 = __high2float(x);
            }
          }
          S[mt][nt][2 * half] = x0;
          S[mt][nt][2 * half + 1] = x1;
          *reinterpret_cast<uint32_t*>(s_s + d * kSV + e) = PackBf16(x0, x1);
        }
  }

  const int64_t o_token = static_cast<int64_t>(Hv) * V;
  float decay_next = num > 0 ? args.decay[static_cast<int64_t>(c_begin) * Hv + h] : 0.f;
  for (int i = 0; i < num; ++i) {
    const int c = c_begin + i, st = i % kStages;
    const float decay = decay_next;
    if (i + 1 < num) decay_next = args.decay[static_cast<int64_t>(c + 1) * Hv + h];
    MbarWait(&full[st], (i / kStages) & 1);
    if (tid == 0 && i + kStages < num) MbarArriveExpectTx(&full[st], Smem::kStageTx);
    __syncthreads();  // S of chunk c - 1 written; chunk c - 1 done with U' and its stage
    if constexpr (kMulticast) {
      if (i > 0) ClusterWait();  // ... in every block of the cluster
    }
    if (i + kStages - 1 < num) issue(c + kStages - 1, (i + kStages - 1) % kStages);

    const bf16* stage = stage_base + st * Smem::kStageElems;
    const bf16* w_s = stage + Smem::kW;
    const bf16* qg_s = stage + Smem::kQg;
    const bf16* kdt_s = stage + Smem::kKdt;
    const bf16* p_s = stage + Smem::kP;
    const bf16* u_s = stage + Smem::kU;

    // U' = U - W S and O = Qg S, rows 16 rw .., columns e0 ..
    float acc_u[NT][4], acc_o[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc_u[nt][r] = acc_o[nt][r] = 0.f;
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks) {
      uint32_t aw[4], aq[4];
      LdsmA(aw, w_s + rw * 16 * kSK + ks * 16, kSK, lane);
      LdsmA(aq, qg_s + rw * 16 * kSK + ks * 16, kSK, lane);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        uint32_t b[4];
        LdsmB2Trans(b, s_s + ks * 16 * kSV + e0 + np * 16, kSV, lane);
        Mma16816(acc_u[2 * np], aw, b);
        Mma16816(acc_u[2 * np + 1], aw, b + 2);
        Mma16816(acc_o[2 * np], aq, b);
        Mma16816(acc_o[2 * np + 1], aq, b + 2);
      }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = rw * 16 + group + 8 * half;
        const int e = e0 + nt * 8 + 2 * tig;
        const __nv_bfloat162 u2 = *reinterpret_cast<const __nv_bfloat162*>(u_s + row * kSV + e);
        *reinterpret_cast<uint32_t*>(un_s + row * kSV + e) =
            PackBf16(__low2float(u2) - acc_u[nt][2 * half],
                     __high2float(u2) - acc_u[nt][2 * half + 1]);
      }
    __syncthreads();  // U' complete; every warp is done reading S

    // O += P U' and S = decay S + Kd^T U', sharing U''s fragments.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int r = 0; r < 4; ++r) S[mt][nt][r] *= decay;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t b[NT / 2][4];
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        LdsmB2Trans(b[np], un_s + ks * 16 * kSV + e0 + np * 16, kSV, lane);
      }
      uint32_t ap[4];
      LdsmA(ap, p_s + rw * 16 * kSC + ks * 16, kSC, lane);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        Mma16816(acc_o[2 * np], ap, b[np]);
        Mma16816(acc_o[2 * np + 1], ap, b[np] + 2);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        uint32_t ak[4];
        LdsmA(ak, kdt_s + (rw * (K / 4) + mt * 16) * kSC + ks * 16, kSC, lane);
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          Mma16816(S[mt][2 * np], ak, b[np]);
          Mma16816(S[mt][2 * np + 1], ak, b[np] + 2);
        }
      }
    }
    if constexpr (kMulticast) ClusterArrive();  // this block is done with stage st

    const int chunk_t0 = seq_begin + i * kChunk;
    const int L = min(kChunk, seq_end - chunk_t0);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = rw * 16 + group + 8 * half;
        if (row < L) {
          StoreOutPair(args.o, (chunk_t0 + row) * o_token + h * V + v0 + e0 + nt * 8 + 2 * tig,
                       args.io_dtype, acc_o[nt][2 * half], acc_o[nt][2 * half + 1]);
        }
      }
    // S in bf16 for the next chunk (its readers passed the barrier above).
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int d = rw * (K / 4) + mt * 16 + group + 8 * half;
          const int e = e0 + nt * 8 + 2 * tig;
          *reinterpret_cast<uint32_t*>(s_s + d * kSV + e) =
              PackBf16(S[mt][nt][2 * half], S[mt][nt][2 * half + 1]);
        }
  }
  if constexpr (kMulticast) {
    if (num > 0) ClusterWait();  // no block leaves while copies it issued are in flight
  }

  if (pages_ok) {
    char* fin = args.pool_base + fp * args.page_bytes;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int d = rw * (K / 4) + mt * 16 + group + 8 * half;
          const int64_t at = tile_offset + d * V + e0 + nt * 8 + 2 * tig;
          if (f32_state) {
            StorePair(reinterpret_cast<float*>(fin) + at, S[mt][nt][2 * half],
                      S[mt][nt][2 * half + 1]);
          } else {
            StorePair(reinterpret_cast<bf16*>(fin) + at, S[mt][nt][2 * half],
                      S[mt][nt][2 * half + 1]);
          }
        }
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_STATE_PASS_BULK_CUH_
