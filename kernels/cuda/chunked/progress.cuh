// The split state pass's chunk-level handshake between kernel 2 (the chain,
// producer) and kernel 3 (the output pass, consumer), which runs alongside it
// under programmatic dependent launch: one 64-bit flag per chain block,
//   (epoch << 32) | chunks done
// where "done" counts the chunks whose hs / un tiles are in memory (count + 1
// once the final state page is written too), and the epoch is the launcher's
// call counter (flags of the previous 2^32 - 2 calls never match; the flag
// buffer starts zeroed and epoch 0 is skipped). The pattern of CUTLASS's generic barrier:
// the block's stores, __syncthreads, then one thread's gpu-scope fence and
// store; the consumer's acquire load, then __syncthreads.
#ifndef GDN_KERNELS_CUDA_CHUNKED_PROGRESS_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_PROGRESS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace gdn::cuda::chunked {

// The chain publishes every kPublishEvery chunks (and at the end): each
// publish costs its thread a gpu-scope fence, so not every step.
inline constexpr int kPublishEvery = 16;

// Call after a __syncthreads that follows the block's stores.
__device__ __forceinline__ void PublishProgress(unsigned long long* flag, uint32_t epoch,
                                                uint32_t done) {
  const unsigned long long value = (static_cast<unsigned long long>(epoch) << 32) | done;
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" ::"l"(flag), "l"(value) : "memory");
}

// Spins until the flag says `epoch` with at least `done` chunks; follow with
// __syncthreads before the block reads what they cover.
__device__ __forceinline__ void WaitProgress(const unsigned long long* flag, uint32_t epoch,
                                             uint32_t done) {
  for (;;) {
    unsigned long long value;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(value) : "l"(flag) : "memory");
    if (static_cast<uint32_t>(value >> 32) == epoch && static_cast<uint32_t>(value) >= done) return;
    __nanosleep(256);
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_PROGRESS_CUH_
