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

// Kernel 2's form (chunked_prefill_state.cu, state_chain.cuh): kSplit, the
// recurrence alone on the chain and o by a parallel kernel 3
// (output_pass.cuh; +48 KB of workspace per (chunk, value head) at K = V =
// 128 for the chunk-start states and U'); kFused, o by a second set of warps
// in the same block. Both give the same bits. kAuto (the default) picks
// kSplit at V tile 16 (few heads x sequences: the chain's 64-ish blocks
// leave the SMs room, and kernel 3 fills them) and kFused otherwise; on the
// H200 (bench/results/2026-12-01-prefill-v6.md) fused was the faster on
// every row of the benchmark but 2/8 1 x 32768 (V tile 16), where split
// was. The values are the C ABI's codes (gdn_chunked_prefill_tuned's
// state_variant); the earlier StatePassKernel (codes 1 - 3) was removed then.
enum class ChunkedStatePass : int { kAuto = 0, kSplit = 4, kFused = 5 };

class ChunkedPrefill {
 public:
  ChunkedPrefill() = default;
  ~ChunkedPrefill();
  ChunkedPrefill(const ChunkedPrefill&) = delete;
  ChunkedPrefill& operator=(const ChunkedPrefill&) = delete;

  // K, V in {64, 128}, Hv a multiple of Hqk, bf16 or fp16 inputs (the
  // tensor-core operand type; fp32 inputs take the recurrent kernel, which
  // the routing picks for them anyway), any state dtype and gating mode;
  // InvalidArgument naming the field otherwise.
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

  // Kernel 1 is ChunkPrepBlockedKernel (chunk_prep_blocked.cuh: T by blocks
  // on all warps, its merges on tensor cores, ldmatrix operands from the raw
  // bf16 / fp16 q / k, P, W, U staged through shared memory). The earlier
  // kernels (per value head, column-wise solve on two warps; then the blocked
  // form with fp32 FMA merges and 4-byte stores, slower on every row of
  // bench/results/2026-12-01-prefill-v4.md) were removed.

  // The form a call with this V tile runs (`form` kAuto: by V tile).
  static ChunkedStatePass ResolveStatePass(ChunkedStatePass form, int v_tile) {
    if (form != ChunkedStatePass::kAuto) return form;
    return v_tile == 16 ? ChunkedStatePass::kSplit : ChunkedStatePass::kFused;
  }
  // Kernel 2's form of the following calls (kAuto by default).
  void set_state_pass(ChunkedStatePass form) { state_pass_ = form; }

  // Workspace bytes a call of this shape needs (for kAuto: the split form's,
  // the larger).
  static size_t WorkspaceBytes(const GdnOptions& options, int num_seqs, int num_chunks,
                               ChunkedStatePass form = ChunkedStatePass::kAuto);
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  void* workspace_ = nullptr;  // cudaMallocAsync on the caller's stream
  size_t workspace_bytes_ = 0;
  // The split form's progress flags (chunked/progress.cuh), zeroed when
  // (re)allocated, and the epoch of the last split call (0: none yet).
  unsigned long long* progress_ = nullptr;
  size_t progress_count_ = 0;
  uint32_t epoch_ = 0;
  ChunkedStatePass state_pass_ = ChunkedStatePass::kAuto;
};

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_CHUNKED_PREFILL_H_
