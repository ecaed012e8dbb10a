// TMA (sm_90 tensor memory accelerator): tiled tensor maps built on the
// host, and the device side's box loads into shared memory (completing on an
// mbarrier), box stores from shared memory (bulk groups), and descriptor
// prefetch.
//
// Host: a CUtensorMap (128 bytes, opaque) describes a global tensor of rank
// 1-5: element type, base address, extent and byte stride of every
// dimension (innermost first), the box copied per instruction, the
// shared-memory swizzle and the out-of-bounds fill. It is encoded with the
// driver's cuTensorMapEncodeTiled, reached through the runtime's
// cudaGetDriverEntryPointByVersion so nothing links libcuda (the runtime is
// linked statically here). Maps go to kernels by value as
// `const __grid_constant__ CUtensorMap` parameters; the device uses the
// parameter's address (generic, param space), never a copy.
//
// Box semantics:
//   - coordinates are signed element indices, innermost first; a box may
//     start or run past the tensor's extent in any dimension;
//   - load: elements outside the tensor are written to shared memory as
//     zeros (FLOAT_OOB_FILL_NONE), and the mbarrier is still credited with
//     the whole box (box bytes = product of the box dims x element size);
//   - store: elements outside the tensor are not written (the box is
//     clipped); nothing else in global memory is touched.
//
// Shared-memory image of a box: dense, innermost dimension fastest, "rows"
// of box[0] x esize bytes. With SWIZZLE_128B (box[0] x esize must be <= 128;
// we use exactly 128, i.e. 64 16-bit elements) each 128-byte row r has its
// eight 16-byte chunks permuted: chunk c goes to chunk c ^ (r % 8). The
// pattern repeats every 8 rows (1024 bytes) and is computed from the shared
// address bits themselves, so the box destination must be 1024-byte aligned
// for the image to be the canonical one (the layout wgmma.cuh's SW128
// descriptors read; Sw128TileOffset there is this formula). Without swizzle
// the destination needs 128-byte alignment (16 is the hardware minimum;
// we keep 128).
#ifndef GDN_KERNELS_CUDA_COMMON_TMA_CUH_
#define GDN_KERNELS_CUDA_COMMON_TMA_CUH_

#include <cuda.h>  // CUtensorMap and its enums only: no driver calls are linked
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000

#include <cstdint>

#include "kernels/cuda/common/cp_async.cuh"  // SharedAddress32

namespace gdn::cuda {

// ---- host --------------------------------------------------------------------

enum class TmaSwizzle {
  kNone,   // dense rows (destination 128-byte aligned)
  k128B,   // 128-byte rows, chunks XOR (row % 8) (destination 1024-byte aligned)
};

// cuTensorMapEncodeTiled from the driver the runtime loaded, or nullptr when
// the driver does not export it (driver older than CUDA 12.0). Looked up
// once per process. The ABI is pinned to the 12.0 signature (the version
// argument), which is what PFN_cuTensorMapEncodeTiled_v12000 declares.
inline PFN_cuTensorMapEncodeTiled_v12000 TensorMapEncoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t err = cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", &fn, /*cudaVersion=*/12000, cudaEnableDefault, &found);
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // the lookup's error is reported as nullptr
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encoder;
}

// Encodes a tiled map of rank 2-5 over `base`:
//   dims[i]         extent of dimension i in elements (dims[0] innermost);
//   byte_strides[i] byte stride of dimension i + 1 (rank - 1 entries; each a
//                   multiple of 16 and < 2^40; dimension 0 is dense);
//   box[i]          box extent (1..256); box[0] x esize a multiple of 16,
//                   and <= 128 with k128B.
// `base` must be 16-byte aligned. Element strides are 1, no interleave, L2
// promotion 128 B, out-of-bounds elements read as zero. Returns the driver's
// result (CUDA_ERROR_NOT_FOUND when the entry point is missing,
// CUDA_ERROR_INVALID_VALUE for arguments that break the rules above, checked
// here so the failure names the rule rather than the driver's generic error).
inline CUresult EncodeTiledTensorMap(CUtensorMap* map, CUtensorMapDataType dtype, uint32_t rank,
                                     const void* base, const uint64_t* dims,
                                     const uint64_t* byte_strides, const uint32_t* box,
                                     TmaSwizzle swizzle) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = TensorMapEncoder();
  if (encode == nullptr) return CUDA_ERROR_NOT_FOUND;
  uint32_t esize = 0;
  switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: esize = 1; break;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: esize = 2; break;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32: esize = 4; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  if (rank < 2 || rank > 5) return CUDA_ERROR_INVALID_VALUE;
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
  for (uint32_t i = 0; i < rank; ++i) {
    if (box[i] == 0 || box[i] > 256 || dims[i] == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  for (uint32_t i = 0; i + 1 < rank; ++i) {
    if (byte_strides[i] % 16 != 0 || byte_strides[i] >= (uint64_t{1} << 40)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  const uint32_t row_bytes = box[0] * esize;
  if (row_bytes % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
  if (swizzle == TmaSwizzle::k128B && row_bytes > 128) return CUDA_ERROR_INVALID_VALUE;
  cuuint64_t g_dims[5];
  cuuint64_t g_strides[4];
  cuuint32_t g_box[5];
  cuuint32_t g_elem_strides[5];
  for (uint32_t i = 0; i < rank; ++i) {
    g_dims[i] = dims[i];
    g_box[i] = box[i];
    g_elem_strides[i] = 1;
    if (i + 1 < rank) g_strides[i] = byte_strides[i];
  }
  return encode(map, dtype, rank, const_cast<void*>(base), g_dims, g_strides, g_box,
                g_elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle == TmaSwizzle::k128B ? CU_TENSOR_MAP_SWIZZLE_128B
                                             : CU_TENSOR_MAP_SWIZZLE_NONE,
                CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// The common 2-D case: a row-major [rows, cols] matrix with rows
// `row_stride_bytes` apart, boxes of [box_rows, box_cols].
inline CUresult EncodeTensorMap2D(CUtensorMap* map, CUtensorMapDataType dtype, const void* base,
                                  uint64_t rows, uint64_t cols, uint64_t row_stride_bytes,
                                  uint32_t box_rows, uint32_t box_cols, TmaSwizzle swizzle) {
  const uint64_t dims[2] = {cols, rows};
  const uint64_t strides[1] = {row_stride_bytes};
  const uint32_t box[2] = {box_cols, box_rows};
  return EncodeTiledTensorMap(map, dtype, 2, base, dims, strides, box, swizzle);
}

// ---- device ------------------------------------------------------------------

// Pulls the 128-byte map into the TMA unit's descriptor cache (one thread,
// early in the kernel; optional).
__device__ __forceinline__ void TmaPrefetchDescriptor(const CUtensorMap* map) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}

// `p` moved up to the next kAlign-byte boundary of the shared window (the
// dynamic shared memory base is only guaranteed 16-byte aligned, SW128 boxes
// and wgmma atoms need 1024): allocate kAlign - 16 bytes more than used.
template <uint32_t kAlign, typename T>
__device__ __forceinline__ T* AlignShared(T* p) {
  static_assert((kAlign & (kAlign - 1)) == 0, "power of two");
  const uint32_t addr = SharedAddress32(p);
  const uint32_t pad = (kAlign - (addr & (kAlign - 1))) & (kAlign - 1);
  return reinterpret_cast<T*>(reinterpret_cast<char*>(p) + pad);
}

// Box loads global -> shared (one thread issues; the bytes complete on
// `bar`, whose phase must expect them: MbarrierArriveExpectTx). Coordinates
// are element indices, innermost first. `smem` is 1024-byte aligned for
// k128B maps, 128-byte aligned otherwise.
__device__ __forceinline__ void TmaLoad2D(void* smem, const CUtensorMap* map, uint64_t* bar,
                                          int32_t c0, int32_t c1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(SharedAddress32(smem)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(SharedAddress32(bar)), "r"(c0), "r"(c1)
      : "memory");
#endif
}

__device__ __forceinline__ void TmaLoad3D(void* smem, const CUtensorMap* map, uint64_t* bar,
                                          int32_t c0, int32_t c1, int32_t c2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(SharedAddress32(smem)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(SharedAddress32(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#endif
}

// Shared-memory writes by threads (generic proxy) become visible to the
// async proxy (TMA stores, wgmma operand reads) only after this fence; the
// writers fence, then a barrier, then one thread issues the store / wgmma.
__device__ __forceinline__ void FenceProxyAsyncShared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Box stores shared -> global (one thread issues; clipped at the tensor's
// extent). Each is part of the issuing thread's current bulk group.
__device__ __forceinline__ void TmaStore2D(const CUtensorMap* map, const void* smem, int32_t c0,
                                           int32_t c1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(SharedAddress32(smem)), "r"(c0), "r"(c1)
      : "memory");
#endif
}

__device__ __forceinline__ void TmaStore3D(const CUtensorMap* map, const void* smem, int32_t c0,
                                           int32_t c1, int32_t c2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(SharedAddress32(smem)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#endif
}

// Closes the issuing thread's bulk group of stores issued since the last
// commit.
__device__ __forceinline__ void TmaStoreCommit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most kPending of the thread's committed store groups still
// read their shared memory (the source may then be overwritten).
template <int kPending>
__device__ __forceinline__ void TmaStoreWaitRead() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Waits until at most kPending of the thread's committed store groups are
// incomplete (their global writes done; kernel exit also waits for them).
template <int kPending>
__device__ __forceinline__ void TmaStoreWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_COMMON_TMA_CUH_
