// The deep persistent variant of the recurrent kernel (device code +
// launcher): as recurrent_persistent_kernel.cuh, a grid of (SMs x resident
// blocks) walks the (sequence, head, V tile) items with a stride, but the
// state tiles stream through a ring of kStages shared-memory buffers, so
// while one item computes the tiles of the next kStages - 1 items are in
// flight (cp.async.cg: around L1).
//
// Why (bench/results/2026-11-29-decode.md): the two-buffer persistent kernel
// keeps one 16 KB bf16 tile per block in flight during compute and tops out
// at 73-78% of copy bandwidth with bf16 pages. Three stages keep two tiles
// per block in flight (3 resident blocks of ~62 KB shared memory at the
// bf16 shape: 96 KB of state in flight per SM instead of 64 KB).
//
// Unlike the two-buffer kernel, an item's page ids are re-read when it
// becomes current instead of being carried (fewer registers); each thread
// copies exactly the 16-byte rows it later owns, so cp.async.wait_group
// alone makes them visible to it.
#ifndef GDN_KERNELS_CUDA_RECURRENT_DEEP_KERNEL_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_DEEP_KERNEL_CUH_

#include <cuda_pipeline.h>

#include <algorithm>

#include "kernels/cuda/recurrent_kernel.cuh"

namespace gdn::cuda {

// The ring of tiles, then for int8 / fp8 kStages scale slots of kVTile /
// kStateScaleCols floats (recurrent_quant.cuh).
template <typename Shape, int kStages>
inline constexpr size_t kDeepTileSmemBytes =
    size_t{kStages} * Shape::kRowsPerThread * Shape::kThreads *
        sizeof(typename Shape::RowBits) +
    (kQuantState<typename Shape::StateT>
         ? size_t{kStages} * Shape::kVTile / kStateScaleCols * sizeof(float)
         : 0u);

template <typename Shape, int kStages>
__device__ __forceinline__ float* DeepScaleSlot(typename Shape::RowBits* ring, int stage) {
  return reinterpret_cast<float*>(ring + kStages * Shape::kRowsPerThread * Shape::kThreads) +
         stage * (Shape::kVTile / kStateScaleCols);
}

// One row vector global -> shared: 16 bytes bypass L1 (the state is
// streamed); cp.async.cg takes only 16, so 8-byte int8 / fp8 rows go through
// L1 (cp.async.ca).
template <typename RowBits>
__device__ __forceinline__ void CopyRowAsync(RowBits* smem_dst, const void* global_src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  if constexpr (sizeof(RowBits) == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global_src)
                 : "memory");
  } else {
    static_assert(sizeof(RowBits) == 8, "16- or 8-byte rows");
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst), "l"(global_src)
                 : "memory");
  }
}

// Issues this thread's rows of item `item_index`'s initial tile into ring
// slot `stage` (nothing for an item past the end, a zero or unusable page).
template <typename Shape, int kStages>
__device__ __forceinline__ void PrefetchDeepTile(const RecurrentParams& p, int item_index,
                                                 int num_items, const ItemDivisors& div,
                                                 typename Shape::RowBits* ring, int stage) {
  using StateT = typename Shape::StateT;
  if (item_index >= num_items) return;
  const RecurrentItem it = LoadItem<Shape>(p, item_index, div);
  if (it.initial_page < 0 || !it.pages_ok) return;
  const StateT* src = reinterpret_cast<const StateT*>(
      p.pool_base + (int64_t)it.initial_page * p.page_bytes) + ThreadTileOffset<Shape>(it);
#pragma unroll
  for (int r = 0; r < Shape::kRowsPerThread; ++r) {
    CopyRowAsync(ring + (stage * Shape::kRowsPerThread + r) * Shape::kThreads + threadIdx.x,
                 src + (int64_t)r * Shape::kRowGroups * Shape::kV);
  }
  PrefetchScales<Shape>(p, it, DeepScaleSlot<Shape, kStages>(ring, stage));
}

template <typename Shape, int kStages>
__global__ void __launch_bounds__(Shape::kThreads, Shape::kMinBlocks)
    GdnRecurrentDeepKernel(const RecurrentParams p, int num_items) {
  static_assert(kStages >= 2, "a ring of at least two tiles");
  using StateT = typename Shape::StateT;
  constexpr int kRows = Shape::kRowsPerThread;
  __shared__ RecurrentSmem<Shape> smem;
  extern __shared__ uint4 dynamic_smem[];
  // [kStages][kRows][kThreads] row vectors, then the scale slots.
  auto* ring = reinterpret_cast<typename Shape::RowBits*>(dynamic_smem);

  TriggerDependentLaunch();
  int item = blockIdx.x;
  if (item >= num_items) return;
  const int stride = gridDim.x;
  const ItemDivisors div = MakeItemDivisors(p);
  if (p.pdl) PrefetchTileL2<Shape>(p, LoadItem<Shape>(p, item, div));  // a hint
  GridDependencyWait();  // PDL: state pages only after the previous kernel
  // Prologue: the tiles of this block's first kStages - 1 items, one commit
  // group each (empty groups keep the count uniform).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    PrefetchDeepTile<Shape, kStages>(p, item + s * stride, num_items, div, ring, s);
    __pipeline_commit();
  }
  int stage = 0;  // ring slot of the current item's tile
  int buffer = 0;
  for (;;) {
    const RecurrentItem cur = LoadItem<Shape>(p, item, div);
    __syncthreads();  // the previous item's staged tokens are consumed
    StageTokens<Shape>(p, smem, cur.bos, min(cur.eos - cur.bos, kTokensPerChunk), cur.head,
                       cur.qk_head, cur.col0);
    // The item kStages - 1 ahead goes into the slot the previous item used
    // (this thread read its own rows of it into registers already).
    const int ahead_stage = stage == 0 ? kStages - 1 : stage - 1;
    PrefetchDeepTile<Shape, kStages>(p, item + (kStages - 1) * stride, num_items, div, ring,
                                     ahead_stage);
    __pipeline_commit();
    __pipeline_wait_prior(kStages - 1);  // this item's tile has landed
    float s[kRows][Shape::kCols];
    const bool has_state = cur.initial_page >= 0 && cur.pages_ok;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const typename Shape::RowBits raw =
          has_state ? ring[(stage * kRows + r) * Shape::kThreads + threadIdx.x]
                    : typename Shape::RowBits{};
      UnpackState<StateT, Shape::kCols>(raw, s[r]);
    }
    __syncthreads();  // staged tokens (and an int8 / fp8 tile's scales) visible
    if constexpr (kQuantState<StateT>) {
      const int col_group = threadIdx.x % Shape::kThreadsPerRow;
      if (has_state) {
        ApplyScales(s,
                    DeepScaleSlot<Shape, kStages>(ring, stage) +
                        col_group * (Shape::kCols / kStateScaleCols),
                    cur.eos > cur.bos ? smem.decay[0] : 1.0f);
      }
    }
    RunItemTokens<Shape>(p, smem, cur, s, buffer);
    item += stride;
    if (item >= num_items) break;
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  __pipeline_wait_prior(0);  // no copy outlives the block (all were empty)
}

template <typename Shape, int kStages>
absl::Status LaunchRecurrentDeepInstance(const RecurrentParams& params, cudaStream_t stream) {
  const int64_t items = (int64_t)params.num_seqs * params.num_v_heads * Shape::kTilesPerHead;
  if (items > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("grid of ", items, " items is too large"));
  }
  constexpr size_t kDynamicSmem = kDeepTileSmemBytes<Shape, kStages>;
  // Per instance and device: the opt-in for the dynamic shared memory and
  // the resident blocks per SM (host-only queries; safe during capture).
  static int resident_blocks[64] = {};
  static int sm_counts[64] = {};
  int device = 0;
  GDN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  if (device < 0 || device >= 64) return absl::InternalError("device index out of range");
  if (resident_blocks[device] == 0) {
    GDN_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(GdnRecurrentDeepKernel<Shape, kStages>,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(kDynamicSmem)));
    int blocks = 0;
    GDN_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, GdnRecurrentDeepKernel<Shape, kStages>, Shape::kThreads, kDynamicSmem));
    GDN_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&sm_counts[device], cudaDevAttrMultiProcessorCount, device));
    resident_blocks[device] = blocks > 0 ? blocks : 1;
  }
  const int64_t grid =
      std::min<int64_t>(items, (int64_t)resident_blocks[device] * sm_counts[device]);
  GDN_CUDA_RETURN_IF_ERROR(LaunchMaybePdl(GdnRecurrentDeepKernel<Shape, kStages>,
                                          static_cast<unsigned>(grid), Shape::kThreads,
                                          kDynamicSmem, stream, params.pdl, params,
                                          static_cast<int>(items)));
  return absl::OkStatus();
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_DEEP_KERNEL_CUH_
