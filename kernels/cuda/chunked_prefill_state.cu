// Template instances and launch of kernel 2 (state_pass.cuh): K, V in
// {64, 128} x input dtype x state dtype x V tile in {16, 32, 64}.
#include <cuda_runtime.h>

#include "kernels/cuda/chunked/launch.h"
#include "kernels/cuda/chunked/state_pass.cuh"

namespace gdn::cuda::chunked {
namespace {

template <int K, int V, int VT, typename In, typename StateT>
cudaError_t Launch(const ChunkArgs& args, cudaStream_t stream) {
  constexpr int kBytes = StateSmem<K, VT>::kBytes;
  static const cudaError_t attr =
      cudaFuncSetAttribute(StatePassKernel<K, V, VT, In, StateT>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) return attr;
  const int64_t blocks =
      static_cast<int64_t>(args.num_seqs) * args.num_v_heads * (V / VT);
  StatePassKernel<K, V, VT, In, StateT>
      <<<static_cast<unsigned>(blocks), kStateThreadsFor<VT>, kBytes, stream>>>(args);
  return cudaGetLastError();
}

template <int K, int V, int VT, typename In>
cudaError_t ByState(StateDType state, const ChunkArgs& args, cudaStream_t stream) {
  switch (state) {
    case StateDType::kF32:
      return Launch<K, V, VT, In, float>(args, stream);
    case StateDType::kBF16:
      return Launch<K, V, VT, In, __nv_bfloat16>(args, stream);
  }
  return cudaErrorInvalidValue;
}

template <int K, int V, int VT>
cudaError_t ByDType(const GdnOptions& options, const ChunkArgs& args,
                    cudaStream_t stream) {
  switch (options.input_dtype) {
    case DType::kF32:
      return ByState<K, V, VT, float>(options.state_dtype, args, stream);
    case DType::kBF16:
      return ByState<K, V, VT, __nv_bfloat16>(options.state_dtype, args, stream);
    case DType::kF16:
      return ByState<K, V, VT, __half>(options.state_dtype, args, stream);
  }
  return cudaErrorInvalidValue;
}

template <int K, int V>
cudaError_t ByTile(const GdnOptions& options, const ChunkArgs& args, int v_tile,
                   cudaStream_t stream) {
  if (v_tile == 16) return ByDType<K, V, 16>(options, args, stream);
  if (v_tile == 32) return ByDType<K, V, 32>(options, args, stream);
  if (v_tile == 64) return ByDType<K, V, 64>(options, args, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchStatePass(const GdnOptions& options, const ChunkArgs& args,
                            int v_tile, cudaStream_t stream) {
  const int K = options.shape.head_dim_k, V = options.shape.head_dim_v;
  if (K == 64 && V == 64) return ByTile<64, 64>(options, args, v_tile, stream);
  if (K == 64 && V == 128) return ByTile<64, 128>(options, args, v_tile, stream);
  if (K == 128 && V == 64) return ByTile<128, 64>(options, args, v_tile, stream);
  if (K == 128 && V == 128) return ByTile<128, 128>(options, args, v_tile, stream);
  return cudaErrorInvalidValue;
}

}  // namespace gdn::cuda::chunked
