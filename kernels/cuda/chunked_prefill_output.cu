// Template instances and launch of kernel 3, the output pass of kernel 2's
// split form (output_pass.cuh): K, V in {64, 128} x operand type (bf16;
// fp16 for fp16 inputs, mma_16bit.cuh).
#include <cuda_runtime.h>

#include "kernels/cuda/chunked/launch.h"
#include "kernels/cuda/chunked/output_pass.cuh"
#include "kernels/cuda/common/head_dims.h"
#include "kernels/cuda/common/pdl.cuh"

namespace gdn::cuda::chunked {
namespace {

template <int K, int V, typename Op>
cudaError_t LaunchFor(const ChunkArgs& args, cudaStream_t stream, bool pdl) {
  constexpr int kBytes = OutputSmem<K, V>::kBytes;
  static const cudaError_t attr = cudaFuncSetAttribute(
      OutputPassKernel<K, V, Op>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) return attr;
  const int64_t blocks = static_cast<int64_t>(args.num_chunks) * args.num_v_heads;
  return LaunchMaybePdl(OutputPassKernel<K, V, Op>, static_cast<unsigned>(blocks),
                        kOutputThreads, kBytes, stream, pdl, args);
}

template <int K, int V>
cudaError_t Launch(const ChunkArgs& args, cudaStream_t stream, bool pdl) {
  return args.io_dtype == DType::kF16 ? LaunchFor<K, V, __half>(args, stream, pdl)
                                      : LaunchFor<K, V, bf16>(args, stream, pdl);
}

}  // namespace

cudaError_t LaunchOutputPass(const GdnOptions& options, const ChunkArgs& args,
                             cudaStream_t stream, bool pdl) {
  return DispatchHeadDims(
      options.shape.head_dim_k, options.shape.head_dim_v,
      [&](auto k, auto v) {
        return Launch<decltype(k)::value, decltype(v)::value>(args, stream, pdl);
      },
      [] { return cudaErrorInvalidValue; });
}

}  // namespace gdn::cuda::chunked
