// Compiled instances of the recurrent kernel for f16 inputs: the list is in
// recurrent_instances.h, the dispatch in recurrent_dispatch.cu. One file per
// input dtype so the slow device compiles run in parallel.
#include "kernels/cuda/recurrent_instances.h"
#include "kernels/cuda/recurrent_launch.cuh"

namespace gdn::cuda {
GDN_RECURRENT_INSTANCES_FOR_INPUT(GDN_RECURRENT_INSTANTIATE, __half)
}  // namespace gdn::cuda
