// Template instances and launch of kernel 1, ChunkPrepBlockedKernel
// (chunk_prep_blocked.cuh): K, V in {64, 128} x input dtype in {fp32, bf16,
// fp16} x variant (args.solve_variant 3: fp32 merges, direct stores; 4:
// tensor-core merges, staged stores), one block per (chunk, q/k head).
#include <cuda_runtime.h>

#include "kernels/cuda/chunked/chunk_prep_blocked.cuh"
#include "kernels/cuda/chunked/launch.h"

namespace gdn::cuda::chunked {
namespace {

// The shared-memory attribute is set once per instance (not a stream
// operation, so launches stay capturable in CUDA graphs).
template <int K, int V, typename In, bool kStaged>
cudaError_t LaunchVariant(const ChunkArgs& args, cudaStream_t stream) {
  constexpr int kBytes = PrepBlockedSmem<K, V>::kBytes;
  static const cudaError_t attr =
      cudaFuncSetAttribute(ChunkPrepBlockedKernel<K, V, In, kStaged>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(args.num_chunks, args.num_qk_heads);
  ChunkPrepBlockedKernel<K, V, In, kStaged><<<grid, kPrepThreads, kBytes, stream>>>(args);
  return cudaGetLastError();
}

template <int K, int V, typename In>
cudaError_t Launch(const ChunkArgs& args, cudaStream_t stream) {
  switch (args.solve_variant) {
    case 3:
      return LaunchVariant<K, V, In, false>(args, stream);
    case 4:
      return LaunchVariant<K, V, In, true>(args, stream);
  }
  return cudaErrorInvalidValue;
}

template <int K, int V>
cudaError_t ByDType(DType dtype, const ChunkArgs& args, cudaStream_t stream) {
  switch (dtype) {
    case DType::kF32:
      return Launch<K, V, float>(args, stream);
    case DType::kBF16:
      return Launch<K, V, __nv_bfloat16>(args, stream);
    case DType::kF16:
      return Launch<K, V, __half>(args, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchChunkPrep(const GdnOptions& options, const ChunkArgs& args,
                            cudaStream_t stream) {
  const int K = options.shape.head_dim_k, V = options.shape.head_dim_v;
  const DType dt = options.input_dtype;
  if (K == 64 && V == 64) return ByDType<64, 64>(dt, args, stream);
  if (K == 64 && V == 128) return ByDType<64, 128>(dt, args, stream);
  if (K == 128 && V == 64) return ByDType<128, 64>(dt, args, stream);
  if (K == 128 && V == 128) return ByDType<128, 128>(dt, args, stream);
  return cudaErrorInvalidValue;
}

}  // namespace gdn::cuda::chunked
