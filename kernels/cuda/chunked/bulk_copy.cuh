// Hopper (sm_90) asynchronous bulk copies global -> shared memory (the 1-D
// form of the TMA unit: no tensor map), their mbarrier completion, and the
// thread-block-cluster barrier that guards a shared-memory buffer which peer
// blocks of the cluster write by multicast.
//
// A stage of shared memory is "full" when its mbarrier (arrival count 1)
// has seen its one arrive.expect_tx(bytes) and `bytes` bytes of copies
// completed into it; waiting uses the barrier's phase parity (0 for the
// stage's first fill, then alternating). Multicast copies land at the same
// CTA-relative offsets in every block of the mask and complete on the
// mbarrier at the same offset in each of them, so every block of the
// cluster must lay its shared memory out identically.
//
// Requirements (PTX ISA, cp.async.bulk): addresses 16-byte aligned, sizes
// multiples of 16 bytes.
#ifndef GDN_KERNELS_CUDA_CHUNKED_BULK_COPY_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_BULK_COPY_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/mma_bf16.cuh"  // SharedAddress

namespace gdn::cuda::chunked {

// ---- mbarrier ---------------------------------------------------------------

__device__ __forceinline__ void MbarInit(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SharedAddress(bar)),
               "r"(arrivals)
               : "memory");
}

// Makes the initialised barriers visible to the async proxy and to the
// other blocks of the cluster (follow with a block or cluster barrier).
__device__ __forceinline__ void FenceMbarInit() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` of copies to come.
__device__ __forceinline__ void MbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   SharedAddress(bar)),
               "r"(bytes)
               : "memory");
}

// Spins until the phase with parity `parity` completed.
__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_LOOP:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_LOOP;\n"
      "}\n" ::"r"(SharedAddress(bar)),
      "r"(parity)
      : "memory");
}

// ---- bulk copies --------------------------------------------------------------

// `bytes` from global `src` into this block's shared `dst`, completing on `bar`.
__device__ __forceinline__ void BulkCopyG2S(void* dst, const void* src, uint32_t bytes,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];\n" ::"r"(SharedAddress(dst)),
      "l"(src), "r"(bytes), "r"(SharedAddress(bar))
      : "memory");
}

// The same copy delivered to every block of the cluster whose rank's bit is
// set in `cta_mask`, at dst's offset, completing on bar's offset in each.
__device__ __forceinline__ void BulkCopyG2SMulticast(void* dst, const void* src,
                                                     uint32_t bytes, uint64_t* bar,
                                                     uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1], %2, [%3], %4;\n" ::"r"(SharedAddress(dst)),
      "l"(src), "r"(bytes), "r"(SharedAddress(bar)), "h"(cta_mask)
      : "memory");
}

// ---- cluster ---------------------------------------------------------------------

__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// Split cluster barrier: every thread of every block arrives (release: its
// earlier shared-memory reads are ordered before) and later waits (acquire).
__device__ __forceinline__ void ClusterArrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void ClusterWait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_BULK_COPY_CUH_
