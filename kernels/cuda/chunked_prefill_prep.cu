// Template instances and launch of kernel 1, ChunkPrepBlockedKernel
// (chunk_prep_blocked.cuh): K, V in {64, 128} x input dtype in {bf16, fp16}
// (the operand type; fp32 inputs are refused by ChunkedPrefill::Supports),
// one block per (chunk, q/k head).
#include <cuda_runtime.h>

#include "kernels/cuda/chunked/chunk_prep_blocked.cuh"
#include "kernels/cuda/chunked/launch.h"
#include "kernels/cuda/common/head_dims.h"

namespace gdn::cuda::chunked {
namespace {

// The shared-memory attribute is set once per instance (not a stream
// operation, so launches stay capturable in CUDA graphs).
template <int K, int V, typename In>
cudaError_t Launch(const ChunkArgs& args, cudaStream_t stream) {
  constexpr int kBytes = PrepBlockedSmem<K, V>::kBytes;
  static const cudaError_t attr =
      cudaFuncSetAttribute(ChunkPrepBlockedKernel<K, V, In>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(args.num_chunks, args.num_qk_heads);
  ChunkPrepBlockedKernel<K, V, In><<<grid, kPrepThreads, kBytes, stream>>>(args);
  return cudaGetLastError();
}

template <int K, int V>
cudaError_t ByDType(DType dtype, const ChunkArgs& args, cudaStream_t stream) {
  switch (dtype) {
    case DType::kBF16:
      return Launch<K, V, __nv_bfloat16>(args, stream);
    case DType::kF16:
      return Launch<K, V, __half>(args, stream);
    case DType::kF32:
      break;  // not compiled (the recurrent kernel's)
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchChunkPrep(const GdnOptions& options, const ChunkArgs& args,
                            cudaStream_t stream) {
  return DispatchHeadDims(
      options.shape.head_dim_k, options.shape.head_dim_v,
      [&](auto k, auto v) {
        return ByDType<decltype(k)::value, decltype(v)::value>(options.input_dtype, args, stream);
      },
      [] { return cudaErrorInvalidValue; });
}

}  // namespace gdn::cuda::chunked
