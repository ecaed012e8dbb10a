// LaunchTPrep (tprep.h): the four TPrepKernel instances (K = 64, 128 x bf16,
// fp16 inputs).
#include "kernels/cuda/chunked/tprep.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/chunked/tprep.cuh"

namespace gdn::cuda::chunked {
namespace {

template <int K, typename In>
cudaError_t Launch(const ChunkArgs& args, const TPrepWorkspace& ws, cudaStream_t stream) {
  constexpr int kBytes = TPrepSmem<K>::kBytes;
  auto* kernel = &TPrepKernel<K, In>;
  if (cudaError_t e =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
      e != cudaSuccess) {
    return e;
  }
  if (args.num_chunks == 0) return cudaSuccess;
  const dim3 grid(args.num_chunks, args.num_qk_heads);
  kernel<<<grid, kTPrepThreads, kBytes, stream>>>(args, ws);
  return cudaGetLastError();
}

template <typename In>
cudaError_t LaunchFor(const ChunkArgs& args, const TPrepWorkspace& ws, int head_dim_k,
                      cudaStream_t stream) {
  switch (head_dim_k) {
    case 64: return Launch<64, In>(args, ws, stream);
    case 128: return Launch<128, In>(args, ws, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t LaunchTPrep(const ChunkArgs& args, const TPrepWorkspace& ws, int head_dim_k,
                        cudaStream_t stream) {
  switch (args.io_dtype) {
    case DType::kBF16: return LaunchFor<__nv_bfloat16>(args, ws, head_dim_k, stream);
    case DType::kF16: return LaunchFor<__half>(args, ws, head_dim_k, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gdn::cuda::chunked
