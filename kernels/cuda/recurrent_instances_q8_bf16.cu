// Compiled int8 / fp8-state instances of the recurrent kernel for bf16 inputs
// (kSmall, kPersistent; recurrent_instances.h). fp16 inputs
// with int8 / fp8 states are not compiled (recurrent_dispatch.cu refuses them).
#include "kernels/cuda/recurrent_instances.h"
#include "kernels/cuda/recurrent_launch.cuh"

namespace gdn::cuda {
GDN_RECURRENT_QUANT_INSTANCES_FOR_INPUT(GDN_RECURRENT_INSTANTIATE, __nv_bfloat16)
}  // namespace gdn::cuda
