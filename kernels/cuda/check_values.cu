#include "kernels/cuda/check_values.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
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

// The batch is a kernel parameter (constant bank): no upload per call.
__global__ void __launch_bounds__(kThreads)
    CheckValuesKernel(const ValueCheckBatch batch, unsigned long long epoch_bits,
                      unsigned long long* marks) {
  const ValueCheck& c = batch.checks[blockIdx.y];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < c.count;
       i += stride) {
    const float x = Load(c.data, i, c.dtype);
    // bf16 and fp16 widen exactly, so non-finite inputs stay non-finite.
    const bool bad = !isfinite(x) || (c.range && !(x >= c.lo && x <= c.hi));
    if (bad) {
      // The largest mark of this epoch is the smallest index.
      atomicMax(&marks[blockIdx.y], epoch_bits | (kMarkIndexMask - static_cast<uint64_t>(i)));
      return;  // later indices of this thread cannot be smaller
    }
  }
}

}  // namespace

absl::Status LaunchCheckValues(const ValueCheckBatch& batch, uint64_t epoch,
                               unsigned long long* marks, cudaStream_t stream) {
  if (batch.count < 1 || batch.count > kMaxValueChecks) {
    return absl::InvalidArgumentError(
        absl::StrCat("value checks: ", batch.count, " ranges, expected 1..", kMaxValueChecks));
  }
  if (epoch < 1 || epoch > kMaxMarkEpoch) {
    return absl::InvalidArgumentError(absl::StrCat("value checks: epoch ", epoch, " out of range"));
  }
  int64_t max_elements = 0;
  for (int i = 0; i < batch.count; ++i) {
    if (batch.checks[i].count < 0 ||
        static_cast<uint64_t>(batch.checks[i].count) >= kMarkIndexMask) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value checks: a range of ", batch.checks[i].count, " elements (at most ",
          kMarkIndexMask - 1, ")"));
    }
    max_elements = std::max(max_elements, batch.checks[i].count);
  }
  const int64_t per_block = kThreads * kPerThread;
  const int64_t blocks =
      std::min(kMaxBlocksPerCheck, std::max<int64_t>(1, (max_elements + per_block - 1) / per_block));
  CheckValuesKernel<<<dim3(static_cast<unsigned>(blocks), batch.count), kThreads, 0, stream>>>(
      batch, static_cast<unsigned long long>(epoch) << kMarkIndexBits, marks);
  GDN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace gdn::cuda
