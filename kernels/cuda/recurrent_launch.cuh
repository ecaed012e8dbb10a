// The host launchers of the recurrent kernels (one block per item:
// recurrent_kernel.cuh; persistent grid: recurrent_persistent_kernel.cuh)
// and LaunchRecurrentShape, compile-time sizes to the launcher of one
// instance. Host code over device templates: included only by the instance
// files (recurrent_instances_<dtype>.cu), which compile it with nvcc.
#ifndef GDN_KERNELS_CUDA_RECURRENT_LAUNCH_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_LAUNCH_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/common/pdl.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/recurrent_instances.h"
#include "kernels/cuda/recurrent_kernel.cuh"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/cuda/recurrent_persistent_kernel.cuh"
#include "kernels/cuda/recurrent_shape.cuh"

namespace gdn::cuda {

// Host launcher of one compiled instance: grid (N * Hv * V / VTile).
template <typename Shape>
absl::Status LaunchRecurrentInstance(const RecurrentParams& params, cudaStream_t stream) {
  const int64_t blocks = (int64_t)params.num_seqs * params.num_v_heads * Shape::kTilesPerHead;
  if (blocks > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("grid of ", blocks, " blocks is too large"));
  }
  if (params.pdl) {
    GDN_CUDA_RETURN_IF_ERROR(LaunchMaybePdl(GdnRecurrentKernel<Shape, true>,
                                            static_cast<unsigned>(blocks), Shape::kThreads, 0,
                                            stream, true, params));
  } else {
    GDN_CUDA_RETURN_IF_ERROR(LaunchMaybePdl(GdnRecurrentKernel<Shape, false>,
                                            static_cast<unsigned>(blocks), Shape::kThreads, 0,
                                            stream, false, params));
  }
  return absl::OkStatus();
}

// Host launcher of one persistent instance: grid min(items, resident blocks
// x SMs), each block striding over the items.
template <typename Shape>
absl::Status LaunchRecurrentPersistentInstance(const RecurrentParams& params,
                                               cudaStream_t stream) {
  const int64_t items = (int64_t)params.num_seqs * params.num_v_heads * Shape::kTilesPerHead;
  if (items > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("grid of ", items, " items is too large"));
  }
  constexpr size_t kDynamicSmem = kPersistentTileSmemBytes<Shape>;
  // Per instance and device: the opt-in for the dynamic shared memory and
  // the resident blocks per SM (host-only queries; safe during capture).
  static int resident_blocks[64] = {};
  static int sm_counts[64] = {};
  int device = 0;
  GDN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  if (device < 0 || device >= 64) return absl::InternalError("device index out of range");
  if (resident_blocks[device] == 0) {
    GDN_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(GdnRecurrentPersistentKernel<Shape>,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(kDynamicSmem)));
    int blocks = 0;
    GDN_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, GdnRecurrentPersistentKernel<Shape>, Shape::kThreads, kDynamicSmem));
    GDN_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&sm_counts[device], cudaDevAttrMultiProcessorCount, device));
    resident_blocks[device] = blocks > 0 ? blocks : 1;
  }
  const int64_t grid =
      std::min<int64_t>(items, (int64_t)resident_blocks[device] * sm_counts[device]);
  GDN_CUDA_RETURN_IF_ERROR(LaunchMaybePdl(GdnRecurrentPersistentKernel<Shape>,
                                          static_cast<unsigned>(grid), Shape::kThreads,
                                          kDynamicSmem, stream, params.pdl, params,
                                          static_cast<int>(items)));
  return absl::OkStatus();
}


template <int kK, int kV, int kVTile, int kThreads, int kMinBlocks, bool kPersistent,
          typename InT, typename StateT>
absl::Status LaunchRecurrentShape(const RecurrentParams& params, cudaStream_t stream) {
  if constexpr (kVTile <= kV) {
    using Shape = RecurrentShape<kK, kV, kVTile, kThreads, InT, StateT, kMinBlocks>;
    if constexpr (kPersistent) {
      return LaunchRecurrentPersistentInstance<Shape>(params, stream);
    } else {
      return LaunchRecurrentInstance<Shape>(params, stream);
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "recurrent kernel: V tile ", kVTile, " is wider than V = ", kV));
  }
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_LAUNCH_CUH_
