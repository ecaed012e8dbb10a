// Kernel 3 of the chunked prefill (kernel 2 variant 4 only): the output of
// every chunk at once, from the tiles kernel 1 left and the chunk-start
// states the chain (state_chain.cuh) wrote,
//   O = Qg S + P U'           [64, V]   -> o (the call's input dtype)
// with qg [ch][64][K], p [ch][64][64], hs [ch][V][K] (S^T) and un [ch][V][64]
// (U'^T), all of the operand type Op, fp32 accumulation: the K / 16 k-steps
// of Qg S first, then the 4 of P U', the order of the fused form
// (state_chain.cuh), so o is bitwise the same.
//
// Block per (chunk, value head), 8 warps: warp w = 4 cw + rw owns rows
// [16 rw, 16 rw + 16) and columns [cw V / 2, (cw + 1) V / 2). No loop
// carries anything between chunks; two blocks fit per SM for latency hiding.
// Launched under programmatic dependent launch right behind the chain, it
// runs alongside it on the SMs the chain leaves (few heads x sequences), each
// block waiting on the progress flags of its chunk (progress.cuh).
#ifndef GDN_KERNELS_CUDA_CHUNKED_OUTPUT_PASS_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_OUTPUT_PASS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/mma_16bit.cuh"
#include "kernels/cuda/common/cp_async.cuh"
#include "kernels/cuda/chunked/progress.cuh"
#include "kernels/cuda/chunked/state_tile.cuh"

namespace gdn::cuda::chunked {

inline constexpr int kOutputThreads = 256;

// Shared memory of OutputPassKernel<K, V, Op>, in bytes:
//   qg [64][K+8], p [64][72], sT [V][K+8], uT [V][72] (Op, 16-bit).
template <int K, int V>
struct OutputSmem {
  static constexpr int kStrideK = K + 8;
  static constexpr int kStrideC = 72;
  static constexpr int kBytes = (64 * kStrideK + 64 * kStrideC + V * kStrideK + V * kStrideC) * 2;
};

template <int K, int V, typename Op>
__global__ void __launch_bounds__(kOutputThreads, 2) OutputPassKernel(const ChunkArgs args) {
  using Smem = OutputSmem<K, V>;
  constexpr int kSK = Smem::kStrideK, kSC = Smem::kStrideC;
  constexpr int NT = V / 16;  // 8-column tiles of a warp's V / 2 columns
  extern __shared__ __align__(16) unsigned char smem[];
  Op* qg_s = reinterpret_cast<Op*>(smem);
  Op* p_s = qg_s + 64 * kSK;
  Op* sT_s = p_s + 64 * kSC;
  Op* uT_s = sT_s + V * kSK;

  const int Hv = args.num_v_heads;
  const int h = blockIdx.x % Hv;
  const int c = blockIdx.x / Hv;
  const int64_t ch = static_cast<int64_t>(c) * Hv + h;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int rw = warp & 3;
  const int e0 = (warp >> 2) * (V / 2);

  // The tiles of kernel 1 (complete before the chain started).
  CpAsyncTileStatic<kOutputThreads, 64, K>(
      qg_s, kSK, reinterpret_cast<const Op*>(args.qg) + ch * 64 * K, K);
  CpAsyncTileStatic<kOutputThreads, 64, 64>(
      p_s, kSC, reinterpret_cast<const Op*>(args.p) + ch * 64 * 64, 64);

  // Where the chunk's tokens are, and whether the chain is past it: the
  // chunk's hs / un tiles, or for a sequence's last chunk also its final
  // state (so this kernel ends after every write of the chain).
  const int n = args.chunk_table[args.num_seqs + 1 + c];
  const int local = c - args.chunk_table[n], count = args.chunk_table[n + 1] - args.chunk_table[n];
  const int chunk_t0 = args.cu_seqlens[n] + local * kChunk;
  const int L = min(kChunk, args.cu_seqlens[n + 1] - chunk_t0);
  if (args.progress != nullptr) {
    if (tid < args.progress_tiles) {
      WaitProgress(args.progress + (static_cast<int64_t>(n) * Hv + h) * args.progress_tiles + tid,
                   args.epoch, local == count - 1 ? count + 1 : local + 1);
    }
    __syncthreads();
  }
  CpAsyncTileStatic<kOutputThreads, V, K>(
      sT_s, kSK, reinterpret_cast<const Op*>(args.hs) + ch * V * K, K);
  CpAsyncTileStatic<kOutputThreads, V, 64>(
      uT_s, kSC, reinterpret_cast<const Op*>(args.un) + ch * V * 64, 64);
  CopyAsyncCommit();

  CopyAsyncWaitAll();
  __syncthreads();

  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int r = 0; r < 4; ++r) acc[nt][r] = 0.f;
  MmaRowTile<K / 16>(acc, acc, qg_s + rw * 16 * kSK, kSK, sT_s + e0 * kSK, kSK, lane);  // Qg S
  MmaRowTile<4>(acc, acc, p_s + rw * 16 * kSC, kSC, uT_s + e0 * kSC, kSC, lane);  // + P U'
  StoreOutRows<V>(args, acc, chunk_t0, L, h, e0, rw, lane);
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_OUTPUT_PASS_CUH_
