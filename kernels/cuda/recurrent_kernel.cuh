// The one-block-per-item recurrent GDN kernel (device code): one block per
// (sequence, value head, V tile) loads the [K, VT] state tile into registers,
// stages the tokens, runs them (recurrent_tokens.cuh) and stores the tile:
// one read and one write of the tile per call. Its launcher is in
// recurrent_launch.cuh.
#ifndef GDN_KERNELS_CUDA_RECURRENT_KERNEL_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/pdl.cuh"
#include "kernels/cuda/common/vector_access.cuh"
#include "kernels/cuda/recurrent_item.cuh"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/cuda/recurrent_quant.cuh"
#include "kernels/cuda/recurrent_shape.cuh"
#include "kernels/cuda/recurrent_tokens.cuh"

namespace gdn::cuda {

// One block per item: load the tile (registers), stage the tokens, run.
// kPdl (launched with programmatic dependent launch) orders the prologue
// differently; a template parameter rather than a branch on p.pdl so the
// plain instance keeps its registers (the wide fp32 shape is capped at 64).
template <typename Shape, bool kPdl>
__global__ void __launch_bounds__(Shape::kThreads, Shape::kMinBlocks)
    GdnRecurrentKernel(const RecurrentParams p) {
  using StateT = typename Shape::StateT;
  constexpr int kRows = Shape::kRowsPerThread;
  __shared__ RecurrentSmem<Shape> smem;

  TriggerDependentLaunch();
  const RecurrentItem it = LoadItem<Shape>(p, blockIdx.x);
  if constexpr (kPdl) {
    // PDL: the inputs are staged while the previous kernel may still run;
    // the state tile (which it may be writing) is only prefetched into L2
    // before the wait and loaded after it.
    PrefetchTileL2<Shape>(p, it);
    StageTokens<Shape>(p, smem, it.bos, min(it.eos - it.bos, kTokensPerChunk), it.head,
                       it.qk_head, it.col0);
    GridDependencyWait();
  }
  // Issue the state loads first: they are the bulk of the bytes, and the
  // token staging below (without PDL) overlaps with them.
  typename Shape::RowBits raw[kRows];
  const bool has_state = it.initial_page >= 0 && it.pages_ok;
  [[maybe_unused]] ThreadScales<kQuantState<StateT> ? Shape::kCols : 8> scales;
  if (has_state) {
    const char* page = p.pool_base + (int64_t)it.initial_page * p.page_bytes;
    const StateT* src = reinterpret_cast<const StateT*>(page) + ThreadTileOffset<Shape>(it);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      raw[r] = LoadStreaming<typename Shape::RowBits>(src + (int64_t)r * Shape::kRowGroups *
                                                                 Shape::kV);
    }
    if constexpr (kQuantState<StateT>) {
      LoadThreadScales(page, ThreadScaleOffset<Shape>(p, it), scales);
    }
  } else {
#pragma unroll
    for (int r = 0; r < kRows; ++r) raw[r] = {};
  }
  if constexpr (!kPdl) {
    StageTokens<Shape>(p, smem, it.bos, min(it.eos - it.bos, kTokensPerChunk), it.head,
                       it.qk_head, it.col0);
  }
  float s[kRows][Shape::kCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r) UnpackState<StateT, Shape::kCols>(raw[r], s[r]);
  __syncthreads();  // staged tokens visible (the first decay below)
  if constexpr (kQuantState<StateT>) {
    if (has_state) ApplyScales(s, scales.s, it.eos > it.bos ? smem.decay[0] : 1.0f);
  }
  int buffer = 0;
  RunItemTokens<Shape>(p, smem, it, s, buffer);
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_KERNEL_CUH_
