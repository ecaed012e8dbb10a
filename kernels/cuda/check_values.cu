#include "kernels/cuda/check_values.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_check.h"

namespace gdn::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerCheck = 64;  // grid: (kBlocksPerCheck, checks)

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
                               int count, cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  CheckValuesKernel<<<dim3(kBlocksPerCheck, count), kThreads, 0, stream>>>(checks, first_bad);
  GDN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace gdn::cuda
