// Template instances and launch of kernel 2, the state pass
// (state_chain.cuh): K, V in {64, 128} x V tile in {16, 32, 64} x operand
// type (bf16; fp16 for fp16 inputs, mma_16bit.cuh) x the form
// (ChunkedStatePass, chunked_prefill.h):
//   split  the chain alone, half the columns per warp (8 at VT 16, 16 at VT
//          32 and 64), then kernel 3 (output_pass.cuh) for o;
//   fused  8 chain warps of VT / 2 columns and 8 warps computing o in the
//          same block.
// Both give bitwise the same o and states. (The earlier StatePassKernel was
// removed after bench/results/2026-12-01-prefill-v6.md.)
#include <cuda_runtime.h>

#include "kernels/cuda/chunked/launch.h"
#include "kernels/cuda/chunked/output_pass.cuh"
#include "kernels/cuda/chunked/state_chain.cuh"
#include "kernels/cuda/common/head_dims.h"

namespace gdn::cuda::chunked {
namespace {

// Shared memory that keeps a kernel-3 block (K = V = 128) off a chain
// block's SM: with 228 KB per SM and 1 KB reserved per block, a chain block
// asking for this leaves less than a kernel-3 block needs (1 KB to spare), so
// the output pass runs on the SMs the chain leaves instead of taking issue
// slots from it.
constexpr int kSmemPerSm = 233472, kSmemReservedPerBlock = 1024;
constexpr int kSoloChainBytes =
    kSmemPerSm - (OutputSmem<128, 128>::kBytes + kSmemReservedPerBlock) - kSmemReservedPerBlock +
    1024;

// The chain; without kFused then kernel 3 for o, alongside it (PDL, the
// progress flags of progress.cuh).
template <int K, int V, int VT, int WC, bool kFused, typename Op>
cudaError_t LaunchChainFor(const GdnOptions& options, const ChunkArgs& args,
                           cudaStream_t stream) {
  constexpr int kBytes = ChainSmem<K, VT, kFused>::kBytes;
  constexpr int kQuantBytes = ChainSmem<K, VT, kFused>::kQuantBytes;
  constexpr int kMaxBytes =
      (kBytes > kSoloChainBytes ? kBytes : kSoloChainBytes) + kQuantBytes;
  static const cudaError_t attr =
      cudaFuncSetAttribute(StateChainKernel<K, V, VT, WC, kFused, Op>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxBytes);
  if (attr != cudaSuccess) return attr;
  const int64_t blocks = static_cast<int64_t>(args.num_seqs) * args.num_v_heads * (V / VT);
  // Split form with one wave of chain blocks: one per SM, alone.
  static const int sms = MultiprocessorCount();
  // int8 / fp8 pages: the chain's max |x| exchange after the tiles.
  const int quant_bytes = IsQuantizedState(args.state_dtype) ? kQuantBytes : 0;
  const int bytes = (!kFused && blocks <= sms ? kMaxBytes - kQuantBytes : kBytes) + quant_bytes;
  StateChainKernel<K, V, VT, WC, kFused, Op>
      <<<static_cast<unsigned>(blocks), kChainThreadsFor<VT, WC, kFused>, bytes, stream>>>(args);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  return kFused ? cudaSuccess : LaunchOutputPass(options, args, stream, /*pdl=*/true);
}

template <int K, int V, int VT, int WC, bool kFused>
cudaError_t LaunchChain(const GdnOptions& options, const ChunkArgs& args, cudaStream_t stream) {
  return args.io_dtype == DType::kF16
             ? LaunchChainFor<K, V, VT, WC, kFused, __half>(options, args, stream)
             : LaunchChainFor<K, V, VT, WC, kFused, bf16>(options, args, stream);
}

template <int K, int V, int VT>
cudaError_t ByForm(const GdnOptions& options, const ChunkArgs& args, ChunkedStatePass form,
                   cudaStream_t stream) {
  switch (form) {
    case ChunkedStatePass::kSplit:
      return LaunchChain<K, V, VT, (VT < 32 ? VT : 32) / 2, false>(options, args, stream);
    case ChunkedStatePass::kFused:
      return LaunchChain<K, V, VT, VT / 2, true>(options, args, stream);
    case ChunkedStatePass::kAuto:
      break;  // resolved by ChunkedPrefill::Run
  }
  return cudaErrorInvalidValue;
}

template <int K, int V>
cudaError_t ByTile(const GdnOptions& options, const ChunkArgs& args, int v_tile,
                   ChunkedStatePass form, cudaStream_t stream) {
  if (v_tile == 16) return ByForm<K, V, 16>(options, args, form, stream);
  if (v_tile == 32) return ByForm<K, V, 32>(options, args, form, stream);
  if (v_tile == 64) return ByForm<K, V, 64>(options, args, form, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchStatePass(const GdnOptions& options, const ChunkArgs& args,
                            int v_tile, ChunkedStatePass form, cudaStream_t stream) {
  return DispatchHeadDims(
      options.shape.head_dim_k, options.shape.head_dim_v,
      [&](auto k, auto v) {
        return ByTile<decltype(k)::value, decltype(v)::value>(options, args, v_tile, form,
                                                              stream);
      },
      [] { return cudaErrorInvalidValue; });
}

}  // namespace gdn::cuda::chunked
