// Compiled int8 / fp8-state warp-slice instances of the recurrent kernel
// (RecurrentVariant::kWarpSlice) for bf16 and fp32 inputs and every (K, V);
// fp16 inputs with int8 / fp8 states are not compiled (recurrent_dispatch.cu
// refuses them for every variant).
#include "kernels/cuda/recurrent_instances.h"
#include "kernels/cuda/recurrent_launch.cuh"

namespace gdn::cuda {
GDN_RECURRENT_WARP_SLICE(GDN_RECURRENT_WARP_SLICE_INSTANTIATE, float, ::gdn::cuda::QInt8)
GDN_RECURRENT_WARP_SLICE(GDN_RECURRENT_WARP_SLICE_INSTANTIATE, float, ::gdn::cuda::QFp8)
GDN_RECURRENT_WARP_SLICE(GDN_RECURRENT_WARP_SLICE_INSTANTIATE, __nv_bfloat16, ::gdn::cuda::QInt8)
GDN_RECURRENT_WARP_SLICE(GDN_RECURRENT_WARP_SLICE_INSTANTIATE, __nv_bfloat16, ::gdn::cuda::QFp8)
}  // namespace gdn::cuda
