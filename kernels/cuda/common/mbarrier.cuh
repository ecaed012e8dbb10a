// mbarrier (sm_90): the shared-memory barrier objects that TMA loads complete
// on and that producer / consumer warps of a warp-specialised kernel hand
// ring stages over with. Cluster-free: every address is this CTA's shared
// memory (.shared::cta), and a CTA launched without a cluster is its own
// one-CTA cluster, so the .cluster-scoped init fence below is the right one.
//
// An mbarrier is one 8-byte word, 8-byte aligned, in shared memory. It
// counts two things per phase:
//   - pending arrivals: set by MbarrierInit(count), decremented by every
//     arrive;
//   - the transaction count: raised by expect_tx(bytes), lowered by the
//     bytes that asynchronous copies (cp.async.bulk[.tensor]) complete on it.
// The current phase completes when both reach zero; the barrier then moves
// to the next phase (parity flips 0 -> 1 -> 0 ...) and re-arms with the init
// count.
//
// Waiting is by phase parity, not by phase number: MbarrierWait(bar, p)
// returns once the phase of parity p has completed, i.e. while the barrier's
// current phase has parity != p. Right after init the current phase is 0, so
// waiting for parity 1 returns at once ("the phase before phase 0 is done").
// The ring idiom that follows (stage s used for the u-th time, u = s / kStages):
//   consumer: MbarrierWait(full[stage],  u & 1)        // the u-th fill landed
//   producer: MbarrierWait(empty[stage], (u & 1) ^ 1)  // the (u-1)-th use ended
// A waiter must never fall two phases behind (parity cannot tell phase p
// from p + 2); a ring of "full" and "empty" barriers per stage guarantees it.
//
// Memory order: completing a phase releases, and a successful wait acquires,
// at CTA scope: data a TMA load wrote (async proxy) or that arriving threads
// wrote before they arrived is visible to the waiter after the wait.
#ifndef GDN_KERNELS_CUDA_COMMON_MBARRIER_CUH_
#define GDN_KERNELS_CUDA_COMMON_MBARRIER_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/cp_async.cuh"  // SharedAddress32

namespace gdn::cuda {

// One thread initialises; the arrive count is the number of arrive calls
// (MbarrierArrive or MbarrierArriveExpectTx) that complete each phase.
__device__ __forceinline__ void MbarrierInit(uint64_t* bar, uint32_t arrive_count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SharedAddress32(bar)),
               "r"(arrive_count)
               : "memory");
#endif
}

// After the inits and before any other thread (or the TMA unit) uses the
// barriers: makes the initialised words visible to the other threads and to
// the async proxy. Then a block barrier (__syncthreads) publishes them to the
// threads of the CTA.
__device__ __forceinline__ void FenceMbarrierInit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// One arrival (release semantics: this thread's earlier writes are visible
// to whoever waits on the phase this arrival helps complete).
__device__ __forceinline__ void MbarrierArrive(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n.reg .b64 state;\n"
      "mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(SharedAddress32(bar))
      : "memory");
#endif
}

// One arrival that also raises the phase's transaction count by `bytes`: the
// producer's call before it issues TMA loads of `bytes` in total that
// complete on `bar` (the loads may land before or after this call within
// the same phase; the count may go negative transiently).
__device__ __forceinline__ void MbarrierArriveExpectTx(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n.reg .b64 state;\n"
      "mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
          SharedAddress32(bar)),
      "r"(bytes)
      : "memory");
#endif
}

// Raises the transaction count without arriving (a second producer thread
// adding its own loads to a phase that someone else arrives on).
__device__ __forceinline__ void MbarrierExpectTx(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(
                   SharedAddress32(bar)),
               "r"(bytes)
               : "memory");
#endif
}

// True once the phase of parity `parity` (0 or 1) has completed. May block
// for a hardware-chosen time before returning false; never hangs by itself.
__device__ __forceinline__ bool MbarrierTryWait(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(SharedAddress32(bar)), "r"(parity)
      : "memory");
  return done != 0;
#else
  return true;
#endif
}

// Spins until the phase of parity `parity` has completed (acquire).
__device__ __forceinline__ void MbarrierWait(uint64_t* bar, uint32_t parity) {
  while (!MbarrierTryWait(bar, parity)) {
  }
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_COMMON_MBARRIER_CUH_
