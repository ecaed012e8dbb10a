#include "kernels/cuda/check_values.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/cuda_check.h"

namespace gdn::cuda {
namespace {

constexpr int kThreads = 256;
// Grid: (blocks per check, checks); each thread takes ~kPerThread elements
// of the longest check, so a 2048-token prefill's q spreads over all SMs.
constexpr int64_t kPerThread = 8;
constexpr int64_t kMaxBlocksPerCheck = 1024;

__device__ float Load(const void* data, int64_t i, DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]);
    case DType::kF16:
      return __half2float(static_cast<const __half*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

__global__ void __launch_bounds__(kThreads)
    CheckValuesKernel(const ValueCheck* checks, unsigned long long* first_bad) {
  const ValueCheck c = checks[blockIdx.y];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < c.count;
       i += stride) {
    const float x = Load(c.data, i, c.dtype);
    // bf16 and fp16 widen exactly, so non-finite inputs stay non-finite.
    const bool bad = !isfinite(x) || (c.range && !(x >= c.lo && x <= c.hi));
    if (bad) {
      atomicMin(&first_bad[blockIdx.y], static_cast<unsigned long long>(i));
      return;  // later indices of this thread cannot be smaller
    }
  }
}

}  // namespace

absl::Status LaunchCheckValues(const ValueCheck* checks, unsigned long long* first_bad,
                               int count, int64_t max_elements, cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  const int64_t per_block = kThreads * kPerThread;
  const int64_t blocks =
      std::min(kMaxBlocksPerCheck, std::max<int64_t>(1, (max_elements + per_block - 1) / per_block));
  CheckValuesKernel<<<dim3(static_cast<unsigned>(blocks), count), kThreads, 0, stream>>>(
      checks, first_bad);
  GDN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace gdn::cuda
