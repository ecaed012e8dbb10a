// LaunchRecurrentShape: compile-time sizes to the kernel launcher of one
// instance (one-block-per-item or persistent). Included only by the
// instance files (recurrent_instances_<dtype>.cu).
#ifndef GDN_KERNELS_CUDA_RECURRENT_LAUNCH_SHAPE_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_LAUNCH_SHAPE_CUH_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/recurrent_instances.h"
#include "kernels/cuda/recurrent_kernel.cuh"
#include "kernels/cuda/recurrent_deep_kernel.cuh"
#include "kernels/cuda/recurrent_persistent_kernel.cuh"

namespace gdn::cuda {

template <int kK, int kV, int kVTile, int kThreads, int kMinBlocks, int kStages,
          typename InT, typename StateT>
absl::Status LaunchRecurrentShape(const RecurrentParams& params, cudaStream_t stream) {
  if constexpr (kVTile <= kV) {
    using Shape = RecurrentShape<kK, kV, kVTile, kThreads, InT, StateT, kMinBlocks>;
    if constexpr (kStages == 2) {
      return LaunchRecurrentPersistentInstance<Shape>(params, stream);
    } else if constexpr (kStages >= 3) {
      return LaunchRecurrentDeepInstance<Shape, kStages>(params, stream);
    } else {
      return LaunchRecurrentInstance<Shape>(params, stream);
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "recurrent kernel: V tile ", kVTile, " is wider than V = ", kV));
  }
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_LAUNCH_SHAPE_CUH_
