// Host entry point of the v8 chunked prefill, form P (bench/prefill/
// HOPPER_DESIGN.md §5 step 2): the chunk table, TPrep (tprep.h) into a
// workspace, then FusedChunkKernel (fused_chunk.cuh), on one stream. No CUDA
// device code here.
//
// Supported so far: K = V = 128, bf16 or fp16 inputs, state pages of every
// dtype (fp32, bf16, int8 / fp8 with their scales, rounded to nearest or
// stochastically as args.stochastic_rounding says), direct or fused gating,
// the L2 norm on or off, any varlen mix, checkpoints at multiples of kChunk
// tokens. Refused with cudaErrorNotSupported (later steps of the design):
// other checkpoint intervals (kPerTokenStates), other head dims; fp32 inputs
// with cudaErrorInvalidValue (the recurrent kernel takes them).
#ifndef GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_H_
#define GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"

namespace gdn::cuda::chunked {

// Precision knobs of the fused kernel (compile-time instances).
struct FusedChunkOptions {
  // W' = V^T - (e^G rk) o X_K enters U' = W' T''^T in Op hi + lo parts
  // (+50% of that product's k-steps). U' = T'' W' cancels strongly where
  // tokens are alike (all-equal inputs: the rows of U' are small differences
  // of O(|v|) terms), so a single Op rounding of W' costs ~2^-9 |W'| per
  // entry of U' where v7, which forms U = T beta V in fp32 first, loses
  // ~2^-9 |U|. H200 (fused_chunk_test, bench/results/2026-12-03-kernels-
  // channel/README.md): both forms pass every bar of the 21 float64 cases;
  // single rounding is 5-10% faster (16/32 4 x 8192 0.788 vs 0.831 ms, 8 x
  // 1024 0.225 vs 0.231) and less accurate where tokens are alike (all-equal
  // bf16: o max_abs_rel 0.00404 vs 0.00347, state 0.000886 vs 0.000449; v7
  // 0.00484 / 0.00143). Kept on (the more accurate) as the routed default.
  bool w_hi_lo = true;
  // Benchmarks only: bit 0 runs the chunk table and TPrep, bit 1 the fused
  // kernel; 3 (both) is the operator. The fused kernel alone reuses the
  // table and workspace of an earlier call with the same arguments.
  int stages = 3;
  // The TPrep workspace's layout covers this many chunks (0: the call's
  // args.num_chunks; never fewer). The span path (span_plan.h) runs TPrep
  // once over a whole sequence and then fused calls over some of its spans:
  // a span call's chunk c is the sequence's chunk c, so it reads the same
  // workspace with the whole sequence's layout.
  int64_t layout_chunks = 0;
  // Non-null: the call's v is zero (the span path's M runs). A [kChunk, Hv,
  // 128] zero tensor, read in place of args.v: the fused kernel's first
  // chunk reads it, and every later one lies past its end, where TMA fills
  // zeros.
  const void* zero_v = nullptr;
  // T'', P and the gate vectors formed inside the fused kernel by a fourth
  // (aux) warpgroup, one chunk ahead of the consumers, instead of by TPrep
  // through the workspace (fused_chunk_aux.cuh): no TPrep launch and no
  // per-chunk workspace traffic. Compiled for the default form (W' hi + lo,
  // every page dtype, o or not); with W' in one Op part cudaErrorNotSupported.
  // The workspace is not read then (it may be null).
  bool aux_prep = false;
};

// Bytes of the workspace a call with these counts needs (TPrepLayout's total).
size_t FusedChunkWorkspaceBytes(int64_t num_chunks, int num_qk_heads, int num_v_heads);

// cudaSuccess when LaunchFusedChunkPrefill takes this shape and these
// dtypes, else the error it would return (before any launch).
cudaError_t FusedChunkSupports(const ChunkArgs& args, int head_dim_k, int head_dim_v);

// Asynchronous on `stream`. args: q, k, v, o, the gating of args.fused_gating,
// cu_seqlens (device), chunk_table (device memory of N + 1 + num_chunks
// int32, filled here), initial_pages / final_pages (device), pool_base,
// page_bytes, num_pages, num_seqs, num_chunks, num_qk_heads, num_v_heads,
// group_size, scale (already resolved, e.g. K^-1/2), l2_norm_qk, io_dtype,
// state_dtype; v7's workspace fields are ignored. total_tokens = T
// (cu_seqlens[N]), for the tensor maps. workspace: at least
// FusedChunkWorkspaceBytes(...) bytes, 256-byte aligned. Page ids outside
// the pool (other than kZeroStatePage as an initial page): that sequence's
// o is NaN and no page is written. args.o null: no o is written (the span
// path's runs that only want end states); with options.w_hi_lo (the
// default) the state-only instance runs, which loads no q or P and forms
// no O. int8 / fp8 pages (state_dtype, or checkpoint_dtype with
// checkpoints) run instances of their own (FusedChunkKernel's kQuantPages),
// compiled for the default w_hi_lo only: cudaErrorNotSupported without it.
// Returns the first error.
cudaError_t LaunchFusedChunkPrefill(const ChunkArgs& args, int head_dim_k, int head_dim_v,
                                    int64_t total_tokens, void* workspace,
                                    size_t workspace_bytes, cudaStream_t stream,
                                    FusedChunkOptions options = {});

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_H_
