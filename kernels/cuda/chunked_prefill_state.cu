// Template instances and launch of kernel 2, the state pass (state_pass.cuh):
// K, V in {64, 128} x V tile in {16, 32, 64} x the variant's knobs:
//   variant 1  32 columns per warp (16 at VT 16), 32-bit fragment loads;
//   variant 2  half the columns per warp (twice the warps), ldmatrix;
//   variant 3  32 columns per warp (16 at VT 16), ldmatrix;
//   variant 4  the split form: the chain alone (state_chain.cuh) with half
//              the columns per warp, then kernel 3 (output_pass.cuh) for o;
//   variant 5  the fused chain: 8 chain warps (VT / 2 columns each) and 8
//              warps computing o in the same block (state_chain.cuh).
// All give bitwise the same o and states.
#include <cuda_runtime.h>

#include "kernels/cuda/chunked/launch.h"
#include "kernels/cuda/chunked/state_chain.cuh"
#include "kernels/cuda/chunked/state_pass.cuh"

namespace gdn::cuda::chunked {
namespace {

template <int K, int V, int VT, int WC, bool kLdsm>
cudaError_t Launch(const ChunkArgs& args, cudaStream_t stream) {
  constexpr int kBytes = StateSmem<K, VT>::kBytes;
  static const cudaError_t attr =
      cudaFuncSetAttribute(StatePassKernel<K, V, VT, WC, kLdsm>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) return attr;
  const int64_t blocks = static_cast<int64_t>(args.num_seqs) * args.num_v_heads * (V / VT);
  StatePassKernel<K, V, VT, WC, kLdsm>
      <<<static_cast<unsigned>(blocks), kStateThreadsFor<VT, WC>, kBytes, stream>>>(args);
  return cudaGetLastError();
}

// The chain (state_chain.cuh); without kFused then kernel 3 for o.
template <int K, int V, int VT, int WC, bool kFused>
cudaError_t LaunchChain(const GdnOptions& options, const ChunkArgs& args, cudaStream_t stream) {
  constexpr int kBytes = ChainSmem<K, VT, kFused>::kBytes;
  static const cudaError_t attr =
      cudaFuncSetAttribute(StateChainKernel<K, V, VT, WC, kFused>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) return attr;
  const int64_t blocks = static_cast<int64_t>(args.num_seqs) * args.num_v_heads * (V / VT);
  StateChainKernel<K, V, VT, WC, kFused>
      <<<static_cast<unsigned>(blocks), kChainThreadsFor<VT, WC, kFused>, kBytes, stream>>>(args);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  return kFused ? cudaSuccess : LaunchOutputPass(options, args, stream);
}

template <int K, int V, int VT>
cudaError_t ByVariant(const GdnOptions& options, const ChunkArgs& args, int variant, cudaStream_t stream) {
  constexpr int kWide = VT < 32 ? VT : 32;  // columns per warp of variants 1 and 3
  switch (variant) {
    case 1:
      return Launch<K, V, VT, kWide, false>(args, stream);
    case 2:
      return Launch<K, V, VT, kWide / 2, true>(args, stream);
    case 3:
      return Launch<K, V, VT, kWide, true>(args, stream);
    case 4:
      return LaunchChain<K, V, VT, kWide / 2, false>(options, args, stream);
    case 5:
      return LaunchChain<K, V, VT, VT / 2, true>(options, args, stream);
  }
  return cudaErrorInvalidValue;
}

template <int K, int V>
cudaError_t ByTile(const GdnOptions& options, const ChunkArgs& args, int v_tile, int variant,
                   cudaStream_t stream) {
  if (v_tile == 16) return ByVariant<K, V, 16>(options, args, variant, stream);
  if (v_tile == 32) return ByVariant<K, V, 32>(options, args, variant, stream);
  if (v_tile == 64) return ByVariant<K, V, 64>(options, args, variant, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchStatePass(const GdnOptions& options, const ChunkArgs& args,
                            int v_tile, int variant, cudaStream_t stream) {
  const int K = options.shape.head_dim_k, V = options.shape.head_dim_v;
  if (K == 64 && V == 64) return ByTile<64, 64>(options, args, v_tile, variant, stream);
  if (K == 64 && V == 128) return ByTile<64, 128>(options, args, v_tile, variant, stream);
  if (K == 128 && V == 64) return ByTile<128, 64>(options, args, v_tile, variant, stream);
  if (K == 128 && V == 128) return ByTile<128, 128>(options, args, v_tile, variant, stream);
  return cudaErrorInvalidValue;
}

}  // namespace gdn::cuda::chunked
