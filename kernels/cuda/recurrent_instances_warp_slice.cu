// Compiled warp-slice instances of the recurrent kernel (RecurrentVariant::
// kWarpSlice, recurrent_warp_slice_kernel.cuh) with fp32 and bf16 states,
// for every input dtype and (K, V); the dispatch is recurrent_dispatch.cu.
#include "kernels/cuda/recurrent_instances.h"
#include "kernels/cuda/recurrent_launch.cuh"

namespace gdn::cuda {
GDN_RECURRENT_WARP_SLICE(GDN_RECURRENT_WARP_SLICE_INSTANTIATE, float, float)
GDN_RECURRENT_WARP_SLICE(GDN_RECURRENT_WARP_SLICE_INSTANTIATE, float, __nv_bfloat16)
GDN_RECURRENT_WARP_SLICE(GDN_RECURRENT_WARP_SLICE_INSTANTIATE, __nv_bfloat16, float)
GDN_RECURRENT_WARP_SLICE(GDN_RECURRENT_WARP_SLICE_INSTANTIATE, __nv_bfloat16, __nv_bfloat16)
GDN_RECURRENT_WARP_SLICE(GDN_RECURRENT_WARP_SLICE_INSTANTIATE, __half, float)
GDN_RECURRENT_WARP_SLICE(GDN_RECURRENT_WARP_SLICE_INSTANTIATE, __half, __nv_bfloat16)
}  // namespace gdn::cuda
