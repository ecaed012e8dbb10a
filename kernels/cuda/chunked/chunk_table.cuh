// The chunk-table kernel of the chunked prefill (chunk_args.h: table[0 .. N]
// the first global chunk of each sequence, table[N + 1 + c] the sequence of
// global chunk c), shared by v7 (chunked_prefill.cu, LaunchChunkTable) and the
// v8 pieces that are built and tested alone (tprep.cuh's test). A template
// (on the block size) so that several translation units may instantiate it.
#ifndef GDN_KERNELS_CUDA_CHUNKED_CHUNK_TABLE_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_CHUNK_TABLE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"

namespace gdn::cuda::chunked {

// Threads of the one chunk-table block.
inline constexpr int kTableThreads = 1024;

__device__ __forceinline__ int ChunksOf(const int32_t* cu_seqlens, int s) {
  return (cu_seqlens[s + 1] - cu_seqlens[s] + kChunk - 1) / kChunk;
}

// table[0..N]: first global chunk of each sequence; table[N + 1 + c]: the
// sequence of chunk c. Each thread owns a contiguous run of sequences; one
// block-wide scan of the per-thread chunk counts. Launch: <<<1, kThreads>>>.
template <int kThreads = kTableThreads>
__global__ void __launch_bounds__(kThreads)
    ChunkTableKernel(const int32_t* cu_seqlens, int num_seqs, int32_t* table) {
  __shared__ int32_t scan[kThreads];
  const int tid = threadIdx.x;
  const int per = (num_seqs + kThreads - 1) / kThreads;
  const int s0 = min(num_seqs, tid * per), s1 = min(num_seqs, s0 + per);
  int local = 0;
  for (int s = s0; s < s1; ++s) local += ChunksOf(cu_seqlens, s);
  scan[tid] = local;
  __syncthreads();
  for (int off = 1; off < kThreads; off <<= 1) {
    const int y = tid >= off ? scan[tid - off] : 0;
    __syncthreads();
    scan[tid] += y;
    __syncthreads();
  }
  int run = scan[tid] - local;  // chunks before this thread's sequences
  for (int s = s0; s < s1; ++s) {
    const int count = ChunksOf(cu_seqlens, s);
    table[s] = run;
    for (int c = 0; c < count; ++c) table[num_seqs + 1 + run + c] = s;
    run += count;
  }
  if (tid == kThreads - 1) table[num_seqs] = scan[tid];
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_CHUNK_TABLE_CUH_
