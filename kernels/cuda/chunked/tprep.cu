// LaunchTPrep (tprep.h): the eight TPrepKernel instances (K = 64, 128 x bf16,
// fp16 inputs x three or four blocks per SM).
#include "kernels/cuda/chunked/tprep.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdlib>

#include "kernels/cuda/chunked/tprep.cuh"

namespace gdn::cuda::chunked {
namespace {

// The register budget of the launched instance (tprep.h): 3 blocks per SM,
// or 4 with GDN_TPREP_BLOCKS_PER_SM=4 in the environment (read once).
int TPrepBlocksPerSm() {
  static const int blocks = [] {
    const char* e = std::getenv("GDN_TPREP_BLOCKS_PER_SM");
    return e != nullptr && std::atoi(e) == 4 ? 4 : 3;
  }();
  return blocks;
}

template <int K, typename In, int kBlocksPerSm>
cudaError_t Launch(const ChunkArgs& args, const TPrepWorkspace& ws, cudaStream_t stream) {
  constexpr int kBytes = TPrepSmem<K>::kBytes;
  auto* kernel = &TPrepKernel<K, In, kBlocksPerSm>;
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
  const bool four = TPrepBlocksPerSm() == 4;
  switch (head_dim_k) {
    case 64:
      return four ? Launch<64, In, 4>(args, ws, stream) : Launch<64, In, 3>(args, ws, stream);
    case 128:
      return four ? Launch<128, In, 4>(args, ws, stream) : Launch<128, In, 3>(args, ws, stream);
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
