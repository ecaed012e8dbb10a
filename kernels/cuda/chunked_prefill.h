// The chunked (WY / UT transform, C = 64) GDN prefill on tensor cores: the
// Prefill entry point of kernels/gdn_params.h for any mix of sequence
// lengths. Host header: includes only the CUDA runtime API.
//
// Two or three kernels per call on the caller's stream (see
// kernels/cuda/chunked/):
//   1. per (chunk, q/k head), looping over its value heads: norms, gating,
//      cumulative decay, A,
//      T = A^-1, W, U and the other state-independent tiles -> workspace
//      (16-bit: bf16, or fp16 for fp16 inputs);
//   2. per (sequence, value head, V tile): the sequential pass over chunks,
//      the state tile in registers; writes the final state page, and o
//      (fused form) or each chunk's start state and U' (split form);
//   3. split form only: o for every chunk in parallel;
// plus a one-block kernel that builds the chunk table from cu_seqlens.
//
// Workspace: about 74 KB per (chunk, value head) at K = V = 128 (122 KB for
// the split form), owned by the
// launcher and grown (stream-ordered cudaMallocAsync / cudaFreeAsync) when a
// call needs more; steady state allocates nothing. Not thread-safe: one
// launcher per stream (the cuda backend owns one).
#ifndef GDN_KERNELS_CUDA_CHUNKED_PREFILL_H_
#define GDN_KERNELS_CUDA_CHUNKED_PREFILL_H_

#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda {

class ChunkedPrefill {
 public:
  ChunkedPrefill() = default;
  ~ChunkedPrefill();
  ChunkedPrefill(const ChunkedPrefill&) = delete;
  ChunkedPrefill& operator=(const ChunkedPrefill&) = delete;

  // K, V in {64, 128}, Hv a multiple of Hqk, any input / state dtype and
  // gating mode; InvalidArgument naming the field otherwise.
  static absl::Status Supports(const GdnOptions& options);

  // Asynchronous on `stream`. Reads params.cu_seqlens_host for planning (grid
  // sizes); everything else stays on the device. Page ids outside the pool
  // (other than kZeroStatePage as an initial page) touch no page: that
  // sequence's o is NaN. v_tile: 0 picks 64 or 16 columns per block (16 when
  // the grid of 32 would leave half the SMs idle); 16, 32 or 64 forces it.
  // stages (benchmarks only): bit 0 runs the chunk-table + prep kernels, bit
  // 1 the state pass; 3 (both) is the operator. The state pass alone reuses
  // the workspace of the previous call with the same params.
  absl::Status Run(const GdnOptions& options, const GdnParams& params,
                   cudaStream_t stream, int v_tile = 0, int stages = 3);

  // Kernel 1's variant, ChunkPrepBlockedKernel (chunk_prep_blocked.cuh: T by
  // blocks on all warps, ldmatrix operands from the raw bf16 q / k): 3 with
  // the merges of T's blocks in fp32 FMA and 4-byte stores of P, W, U; 4 with
  // the merges on tensor cores (split bf16) and P, W, U staged through shared
  // memory (16-byte stores). Variants 0 - 2 (per value head; column-wise solve
  // on two warps, 1.38 vs 1.18 ms for 3 at 16/32 1 x 32768 on the H200) were
  // removed after bench/results/2026-12-01-prefill-v3.md.
  static constexpr int kDefaultSolve = 4;
  static bool IsSolveVariant(int variant) { return variant == 3 || variant == 4; }
  void set_solve_variant(int variant) { solve_variant_ = variant; }

  // Kernel 2's form (chunked_prefill_state.cu, state_chain.cuh): 4 split,
  // the recurrence alone on the chain and o by a parallel kernel 3
  // (output_pass.cuh; +48 KB of workspace per (chunk, value head) at K = V =
  // 128 for the chunk-start states and U'); 5 fused, o by a second set of
  // warps in the same block. Both give the same bits. kAutoState (0, the
  // default) picks 4 at V tile 16 (few heads x sequences: the chain's 64-ish
  // blocks leave the SMs room, and kernel 3 fills them) and 5 otherwise; on
  // the H200 (bench/results/2026-12-01-prefill-v6.md) 5 was the faster on
  // every row of the benchmark but 2/8 1 x 32768 (V tile 16), where 4 was.
  // 1 - 3 (StatePassKernel, o on the chain's own warps) were removed then.
  static constexpr int kAutoState = 0;
  static constexpr int kDefaultState = kAutoState;
  static bool IsStateVariant(int variant) {
    return variant == kAutoState || variant == 4 || variant == 5;
  }
  static bool IsSplitState(int variant) { return variant == 4; }
  // The form a call with this (resolved) V tile runs.
  static int ResolveStateVariant(int variant, int v_tile) {
    return variant != kAutoState ? variant : (v_tile == 16 ? 4 : 5);
  }
  void set_state_variant(int variant) { state_variant_ = variant; }

  // Workspace bytes a call of this shape needs (for kAutoState: the split
  // form's, the larger).
  static size_t WorkspaceBytes(const GdnOptions& options, int num_seqs,
                               int num_chunks, int state_variant = kDefaultState);
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  void* workspace_ = nullptr;  // cudaMallocAsync on the caller's stream
  size_t workspace_bytes_ = 0;
  // The split form's progress flags (chunked/progress.cuh), zeroed when
  // (re)allocated, and the epoch of the last split call (0: none yet).
  unsigned long long* progress_ = nullptr;
  size_t progress_count_ = 0;
  uint32_t epoch_ = 0;
  int solve_variant_ = kDefaultSolve;
  int state_variant_ = kDefaultState;
};

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_CHUNKED_PREFILL_H_
