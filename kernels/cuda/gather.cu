#include "kernels/cuda/gather.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"

namespace gdn::cuda {
namespace {

constexpr int kThreads = 256;
// Loads in flight per thread before their stores: reads over the bus take
// microseconds, so each thread keeps several outstanding.
constexpr int kUnroll = 4;

template <typename Word>
__device__ void CopyWords(Word* dst, const Word* src, uint64_t n) {
  uint64_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * kThreads < n; i += kUnroll * kThreads) {
    Word w[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) w[u] = src[i + u * kThreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * kThreads] = w[u];
  }
  for (; i < n; i += kThreads) dst[i] = src[i];
}

__global__ void __launch_bounds__(kThreads) GatherKernel(char* dst_base, const GatherCopy* items) {
  const GatherCopy item = items[blockIdx.x];
  char* dst = dst_base + item.dst_offset;
  const char* src = static_cast<const char*>(item.src);
  const uint64_t alignment = reinterpret_cast<uintptr_t>(dst) |
                             reinterpret_cast<uintptr_t>(src) | item.bytes;
  if (alignment % 16 == 0) {
    CopyWords(reinterpret_cast<uint4*>(dst), reinterpret_cast<const uint4*>(src), item.bytes / 16);
  } else if (alignment % 4 == 0) {
    CopyWords(reinterpret_cast<uint32_t*>(dst), reinterpret_cast<const uint32_t*>(src),
              item.bytes / 4);
  } else {
    CopyWords(dst, src, item.bytes);
  }
}

}  // namespace

absl::Status LaunchGather(void* dst_base, const GatherCopy* items, int count,
                          cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  if (dst_base == nullptr || items == nullptr) {
    return absl::InvalidArgumentError("gather: null destination or item list");
  }
  GatherKernel<<<count, kThreads, 0, stream>>>(static_cast<char*>(dst_base), items);
  GDN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace gdn::cuda
