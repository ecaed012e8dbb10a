// cp.async (sm_80+): asynchronous global -> shared copies that bypass the
// registers, and their commit groups. The one spelling of these
// instructions for every kernel here (recurrent persistent tile ring and
// int8 / fp8 scales, the chunked prefill's workspace tiles).
//
// Each thread sees only its own copies complete (cp.async.wait_group); data
// that other threads copied needs a block barrier after the wait.
#ifndef GDN_KERNELS_CUDA_COMMON_CP_ASYNC_CUH_
#define GDN_KERNELS_CUDA_COMMON_CP_ASYNC_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace gdn::cuda {

__device__ __forceinline__ uint32_t SharedAddress32(const void* smem) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(smem));
}

// 16 bytes, around L1 (cp.async.cg: streamed data, read once from L2).
// Both pointers 16-byte aligned.
__device__ __forceinline__ void CopyAsync16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SharedAddress32(smem)),
               "l"(gmem)
               : "memory");
}

// 16 bytes through L1 (cp.async.ca: data that several threads of the block
// read, e.g. a tile's int8 / fp8 scales).
__device__ __forceinline__ void CopyAsync16ThroughL1(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(SharedAddress32(smem)),
               "l"(gmem)
               : "memory");
}

// 8 bytes (cp.async.cg takes only 16, so 8-byte copies go through L1).
__device__ __forceinline__ void CopyAsync8(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(SharedAddress32(smem)),
               "l"(gmem)
               : "memory");
}

// 4 bytes (through L1, as CopyAsync8): single fp32 values, e.g. the
// chunked prefill's per-token gates.
__device__ __forceinline__ void CopyAsync4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(SharedAddress32(smem)),
               "l"(gmem)
               : "memory");
}

// One row vector of 16 or 8 bytes (uint4 / uint2): the width picks the
// instruction above.
template <typename RowBits>
__device__ __forceinline__ void CopyRowAsync(RowBits* smem, const void* gmem) {
  if constexpr (sizeof(RowBits) == 16) {
    CopyAsync16(smem, gmem);
  } else {
    static_assert(sizeof(RowBits) == 8, "16- or 8-byte rows");
    CopyAsync8(smem, gmem);
  }
}

// Closes the group of this thread's copies issued since the last commit.
__device__ __forceinline__ void CopyAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most kPending of this thread's most recent groups are in
// flight (0: all of them have landed). The "memory" clobber keeps the
// compiler from moving shared-memory reads of the landed data above the
// wait (volatile alone orders it only against other volatile asm).
template <int kPending>
__device__ __forceinline__ void CopyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void CopyAsyncWaitAll() { CopyAsyncWait<0>(); }

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_COMMON_CP_ASYNC_CUH_
