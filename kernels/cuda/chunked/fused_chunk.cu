// LaunchFusedChunkPrefill (fused_chunk.h): checks, the tensor maps of
// FusedChunkKernel (fused_chunk.cuh) over the call's tensors and the TPrep
// workspace, and the three launches (chunk table, TPrep, the fused kernel;
// no TPrep with the aux warpgroup).
#include "kernels/cuda/chunked/fused_chunk.h"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/cuda/chunked/chunk_table.cuh"
#include "kernels/cuda/chunked/fused_chunk.cuh"
#include "kernels/cuda/chunked/tprep.h"
#include "kernels/cuda/chunked/tprep_args.h"
#include "kernels/cuda/common/tma.cuh"

namespace gdn::cuda::chunked {
namespace {

// (cols, heads, T) map over a [T, heads, cols] tensor of 16-bit elements,
// box (64, 1, 64), SWIZZLE_128B.
CUresult EncodeTokenMap(CUtensorMap* map, CUtensorMapDataType dtype, const void* base, int cols,
                        int heads, int64_t tokens) {
  const uint64_t dims[3] = {static_cast<uint64_t>(cols), static_cast<uint64_t>(heads),
                            static_cast<uint64_t>(tokens)};
  const uint64_t strides[2] = {static_cast<uint64_t>(cols) * 2,
                               static_cast<uint64_t>(heads) * cols * 2};
  const uint32_t box[3] = {64, 1, 64};
  return EncodeTiledTensorMap(map, dtype, 3, base, dims, strides, box, TmaSwizzle::k128B);
}

// [rows][64] fp32 rows of the workspace, box (64, 1).
CUresult EncodeGateMap(CUtensorMap* map, const float* base, int64_t rows) {
  return EncodeTensorMap2D(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, base, rows, 64, 256, 1, 64,
                           TmaSwizzle::kNone);
}

// [rows][64] 16-bit tiles of the workspace, box (64, 64), SWIZZLE_128B.
CUresult EncodeTileMap(CUtensorMap* map, CUtensorMapDataType dtype, const uint16_t* base,
                       int64_t rows) {
  return EncodeTensorMap2D(map, dtype, base, rows, 64, 128, 64, 64, TmaSwizzle::k128B);
}

template <typename In, bool kWHiLo, bool kWithO, bool kQuantPages = false, bool kAuxPrep = false>
cudaError_t LaunchFused(const ChunkArgs& args, const TPrepWorkspace& ws, int64_t total_tokens,
                        const void* zero_v, cudaStream_t stream) {
  const CUtensorMapDataType dtype = std::is_same_v<In, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                               : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const int64_t tiles = static_cast<int64_t>(args.num_chunks) * args.num_v_heads;
  const int64_t qk_tiles = static_cast<int64_t>(args.num_chunks) * args.num_qk_heads;
  FusedChunkMaps maps{};  // with the aux warpgroup: q, k, v only
  const CUresult token_maps[3] = {
      EncodeTokenMap(&maps.q, dtype, args.q, 128, args.num_qk_heads, total_tokens),
      EncodeTokenMap(&maps.k, dtype, args.k, 128, args.num_qk_heads, total_tokens),
      zero_v != nullptr
          ? EncodeTokenMap(&maps.v, dtype, zero_v, 128, args.num_v_heads, kChunk)
          : EncodeTokenMap(&maps.v, dtype, args.v, 128, args.num_v_heads, total_tokens),
  };
  for (const CUresult r : token_maps) {
    if (r != CUDA_SUCCESS) return cudaErrorInvalidValue;
  }
  if constexpr (!kAuxPrep) {
    const CUresult workspace_maps[7] = {
        EncodeTileMap(&maps.t_hi, dtype, ws.t_hi, tiles * 64),
        EncodeTileMap(&maps.t_lo, dtype, ws.t_lo, tiles * 64),
        EncodeTileMap(&maps.p, dtype, ws.p, tiles * 64),
        EncodeGateMap(&maps.eg, ws.eg, tiles),
        EncodeGateMap(&maps.ed, ws.ed, tiles),
        EncodeGateMap(&maps.rq, ws.rq, qk_tiles),
        EncodeGateMap(&maps.rk, ws.rk, qk_tiles),
    };
    for (const CUresult r : workspace_maps) {
      if (r != CUDA_SUCCESS) return cudaErrorInvalidValue;
    }
  }
  auto* kernel = &FusedChunkKernel<In, kWHiLo, kWithO, kQuantPages, kAuxPrep>;
  constexpr int kBytes = kAuxPrep ? FusedChunkSmem::kAuxBytes : FusedChunkSmem::kBytes;
  constexpr int kThreads = kAuxPrep ? kFusedAuxThreads : kFusedThreads;
  if (cudaError_t e =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
      e != cudaSuccess) {
    return e;
  }
  const int units = args.num_seqs * args.num_v_heads;
  kernel<<<units, kThreads, kBytes, stream>>>(maps, args, ws.decay, ws.rescaled);
  return cudaGetLastError();
}

// The instance for the call's form. int8 / fp8 pages (the state's, or the
// checkpoints'): the default form with the quantized load and stores,
// whatever o (a null o skips its stores). No o (the span path's phase 1):
// the state-only form. Both compiled for the default W' hi + lo only (with
// W' in one Op part and no o the full form runs and skips its o stores);
// the aux warpgroup's forms (kAuxPrep) for W' hi + lo only.
template <bool kAuxPrep>
cudaError_t LaunchForm(const ChunkArgs& args, const TPrepWorkspace& ws, int64_t total_tokens,
                       const FusedChunkOptions& options, cudaStream_t stream) {
  const bool hi_lo = options.w_hi_lo;
  const void* zv = options.zero_v;
  const bool quant = IsQuantizedState(args.state_dtype) ||
                     (args.checkpoint_interval > 0 && IsQuantizedState(args.checkpoint_dtype));
  const bool state_only = args.o == nullptr && hi_lo;
  if ((quant || kAuxPrep) && !hi_lo) return cudaErrorNotSupported;  // not compiled
  auto launch = [&](auto in) {
    using In = decltype(in);
    if (quant) {
      return LaunchFused<In, true, true, true, kAuxPrep>(args, ws, total_tokens, zv, stream);
    }
    if (state_only) {
      return LaunchFused<In, true, false, false, kAuxPrep>(args, ws, total_tokens, zv, stream);
    }
    if (hi_lo) {
      return LaunchFused<In, true, true, false, kAuxPrep>(args, ws, total_tokens, zv, stream);
    }
    if constexpr (!kAuxPrep) {
      return LaunchFused<In, false, true>(args, ws, total_tokens, zv, stream);
    }
    return cudaErrorNotSupported;
  };
  switch (args.io_dtype) {
    case DType::kBF16:
      return launch(__nv_bfloat16{});
    case DType::kF16:
      return launch(__half{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

size_t FusedChunkWorkspaceBytes(int64_t num_chunks, int num_qk_heads, int num_v_heads) {
  return TPrepLayout(num_chunks, num_qk_heads, num_v_heads).total;
}

cudaError_t FusedChunkSupports(const ChunkArgs& args, int head_dim_k, int head_dim_v) {
  if (args.io_dtype != DType::kBF16 && args.io_dtype != DType::kF16) {
    return cudaErrorInvalidValue;
  }
  if (head_dim_k != 128 || head_dim_v != 128) return cudaErrorNotSupported;
  // Checkpoints at whole chunks (a chunk end); not kPerTokenStates.
  if (args.checkpoint_interval < 0 || args.checkpoint_interval % kChunk != 0) {
    return cudaErrorNotSupported;
  }
  if (args.num_qk_heads <= 0 || args.num_v_heads <= 0 ||
      args.num_v_heads % args.num_qk_heads != 0 ||
      args.group_size != args.num_v_heads / args.num_qk_heads) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t LaunchFusedChunkPrefill(const ChunkArgs& args, int head_dim_k, int head_dim_v,
                                    int64_t total_tokens, void* workspace, size_t workspace_bytes,
                                    cudaStream_t stream, FusedChunkOptions options) {
  if (cudaError_t e = FusedChunkSupports(args, head_dim_k, head_dim_v); e != cudaSuccess) {
    return e;
  }
  if (args.num_seqs == 0 || args.num_chunks == 0 || total_tokens == 0) return cudaSuccess;
  const int64_t layout_chunks = options.layout_chunks > 0 ? options.layout_chunks : args.num_chunks;
  if (layout_chunks < args.num_chunks) return cudaErrorInvalidValue;
  const TPrepLayout layout(layout_chunks, args.num_qk_heads, args.num_v_heads);
  // The aux warpgroup's form reads no workspace.
  if (!options.aux_prep && (workspace == nullptr || workspace_bytes < layout.total ||
                            reinterpret_cast<uintptr_t>(workspace) % 256 != 0)) {
    return cudaErrorInvalidValue;
  }
  const TPrepWorkspace ws = layout.At(workspace);
  if (options.stages & 1) {
    ChunkTableKernel<kTableThreads><<<1, kTableThreads, 0, stream>>>(
        args.cu_seqlens, args.num_seqs, const_cast<int32_t*>(args.chunk_table));
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    if (!options.aux_prep) {
      if (cudaError_t e = LaunchTPrep(args, ws, head_dim_k, stream); e != cudaSuccess) return e;
    }
  }
  if (!(options.stages & 2)) return cudaSuccess;
  return options.aux_prep ? LaunchForm<true>(args, ws, total_tokens, options, stream)
                          : LaunchForm<false>(args, ws, total_tokens, options, stream);
}

}  // namespace gdn::cuda::chunked
