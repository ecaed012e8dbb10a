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
// That is v7. Calls v8 can run (K = V = 128, pages of any dtype, checkpoints
// at whole chunks, compute capability 9.0) with enough sequences x value heads
// take v8 instead (ChunkedGeneration below; chunked_prefill_v8.cc): chunk
// table, TPrep and one fused kernel (kernels/cuda/chunked/fused_chunk.h).
//
// Workspace: about 74 KB per (chunk, value head) at K = V = 128 (122 KB for
// the split form; v8: the chunk table and TPrep's tiles), owned by the
// launcher and grown (stream-ordered cudaMallocAsync / cudaFreeAsync) when a
// call needs more; one buffer for both generations; steady state allocates
// nothing. Not thread-safe: one launcher per stream (the cuda backend owns
// one).
#ifndef GDN_KERNELS_CUDA_CHUNKED_PREFILL_H_
#define GDN_KERNELS_CUDA_CHUNKED_PREFILL_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// Which generation of the chunked prefill a call runs. kV7: the three
// kernels above (every shape and state dtype of Supports). kV8: form P of
// bench/prefill/HOPPER_DESIGN.md §5 step 2 (kernels/cuda/chunked/
// fused_chunk.h: chunk table, TPrep, FusedChunkKernel; sm_90a only; K = V =
// 128, pages of any state dtype, checkpoints at whole chunks). kAuto (the
// default) picks v8 where ChunkedPrefill::ResolveGeneration says so, else v7.
// The values are the C ABI's codes (gdn_chunked_prefill_tuned's
// state_variant 7 and 8).
// kV8Spans: v8 with one sequence cut into spans walked in parallel
// (chunked/span_plan.h; HOPPER_DESIGN.md §4.7; with checkpoints, spans of
// whole checkpoint intervals); kAuto picks it for one sequence the plan
// cuts into 3 or more spans (AutoSpans).
enum class ChunkedGeneration : int { kAuto = 0, kV7 = 7, kV8 = 8, kV8Spans = 9 };

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

  // The generation of the following calls (kAuto by default). kV8 forced
  // on a call v8 cannot run (shape, dtypes, checkpoints, a device other than
  // compute capability 9.0, v_tile / state pass forced) fails that call
  // with the reason; kV7 forced runs v7 exactly as before v8 existed.
  void set_generation(ChunkedGeneration generation) { generation_ = generation; }
  ChunkedGeneration generation() const { return generation_; }
  // kAuto's threshold on units = num_seqs * num_v_heads (v8 runs one CTA per
  // unit, with no sequence-parallel path yet): v8 only from this many units.
  // -1 (the default) is DefaultV8MinUnits(SM count); tests and benchmarks
  // set it to compare.
  void set_v8_min_units(int units) { v8_min_units_ = units; }
  // kV8Spans' span count when forced: 0 (the default) plans it
  // (chunked::PlanSpans), > 0 forces that many (tests, benchmarks). kAuto
  // always plans.
  void set_v8_spans(int spans) { v8_spans_ = spans; }
  // v8 calls (the span path's too): T'', P and the gates formed by the
  // fused kernel's aux warpgroup (chunked::FusedChunkOptions::aux_prep)
  // instead of by TPrep; no TPrep launch, and RunV8's workspace holds only
  // the chunk table. Off by default until measured (tests and benchmarks
  // set it).
  void set_v8_aux_prep(bool on) { v8_aux_prep_ = on; }
  // SM count / 6: 22 on the H200. v8 gives each (sequence, value head) one
  // CTA that walks all its chunks; v7's state pass splits V into 16 / 32 / 64
  // column tiles (up to 8 blocks per unit), so with very few units v7 keeps
  // more SMs busy. Measured on the H200 (route_bench, 2026-12-03, v7 / v8
  // ms): 8 units (2/8 1 x 32768) 0.889 / 1.333 and 16 units (8/16 1 x
  // 32768) 1.415 / 1.483: v7; 32 units (16/32 1 x 32768) 1.926 / 1.759,
  // (1 x 8192) 0.509 / 0.462, (1 x 2048) 0.144 / 0.132, and 64 units (2 x
  // 8192) 0.846 / 0.579: v8. The crossing lies between 16 and 32 units; a
  // sixth of the SMs sits between them. Long single sequences through v8
  // match the float64 oracle within v7's bars, at v7's error level (route
  // test ForcedV8OnLongSingleSequences: rel_l2 below v7's in three runs;
  // route_bench's 1 x 32768 row). Few units need the span path
  // (HOPPER_DESIGN.md §4.7) to beat v7.
  static int DefaultV8MinUnits(int sm_count) { return sm_count / 6; }
  // The spans kAuto would cut this call into: chunked::PlanSpans of its one
  // sequence on this device's SMs (in units of its checkpoint interval, if
  // any), for sequences of kAutoSpansMinTokens or more (else 1, as for
  // several sequences or without cu_seqlens_host).
  // kAuto takes the span path from 3 spans. Measured on the H200
  // (route_bench, bench/results/2026-12-05-prefill-spans, planned spans / v8
  // / v7 ms): 16/32 1 x 32768 (3 spans) 1.316 / 1.732 / 1.904, 1 x 8192 (3)
  // 0.407 / 0.452 / 0.502; 8/16 1 x 32768 (5) 0.831 / 1.613 / 1.436; 2/8
  // 1 x 32768 (9) 0.477 / 1.438 / 0.919. The shortest measured win, 8192
  // tokens, is the bound until shorter ones are timed (the plan itself
  // allows 3 spans from 48 chunks, 3072 tokens).
  static constexpr int64_t kAutoSpansMinTokens = 8192;
  static int AutoSpans(const GdnOptions& options, const GdnParams& params);
  // The generation a call with these arguments runs: kV7 or kV8 (never
  // kAuto), for the generation set now, `v_tile` and the state pass; an
  // error when kV8 is forced and v8 cannot run the call.
  absl::StatusOr<ChunkedGeneration> ResolveGeneration(const GdnOptions& options,
                                                      const GdnParams& params,
                                                      int v_tile = 0) const;
  // The generation the last successful Run ran (kAuto before any), and the
  // spans it cut the sequence into (1 unless kV8Spans).
  ChunkedGeneration last_generation() const { return last_generation_; }
  int last_spans() const { return last_spans_; }

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

  // Workspace bytes a call of this shape needs under v7 (for kAuto: the
  // split form's, the larger); V8WorkspaceBytes: under v8 (chunk table +
  // TPrep's workspace). Both live in the one grow-only buffer.
  static size_t WorkspaceBytes(const GdnOptions& options, int num_seqs, int num_chunks,
                               ChunkedStatePass form = ChunkedStatePass::kAuto);
  static size_t V8WorkspaceBytes(const GdnOptions& options, int num_seqs, int64_t num_chunks);
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  // Grows the workspace (stream-ordered) to at least `bytes`; with `stages`
  // lacking bit 0 a too-small workspace is an error (it would hold no tiles).
  absl::Status EnsureWorkspace(size_t bytes, int stages, cudaStream_t stream);
  // The v8 call (chunked_prefill_v8.cc); options / params already validated.
  absl::Status RunV8(const GdnOptions& options, const GdnParams& params, cudaStream_t stream,
                     int stages);
  // The v8 span call (chunked_prefill_spans.cc): one sequence, at least two
  // spans planned; else RunV8. Sets last_generation_.
  absl::Status RunV8Spans(const GdnOptions& options, const GdnParams& params,
                          cudaStream_t stream);
  // v8's device condition for the current device: compute capability 9.0
  // (fused_chunk.cu is compiled for sm_90a alone), cached per device.
  bool DeviceRunsV8() const;
  // kAuto's threshold (set_v8_min_units, else DefaultV8MinUnits).
  int V8MinUnits() const;

  void* workspace_ = nullptr;  // cudaMallocAsync on the caller's stream
  size_t workspace_bytes_ = 0;
  // The split form's progress flags (chunked/progress.cuh), zeroed when
  // (re)allocated, and the epoch of the last split call (0: none yet).
  unsigned long long* progress_ = nullptr;
  size_t progress_count_ = 0;
  uint32_t epoch_ = 0;
  ChunkedStatePass state_pass_ = ChunkedStatePass::kAuto;
  ChunkedGeneration generation_ = ChunkedGeneration::kAuto;
  ChunkedGeneration last_generation_ = ChunkedGeneration::kAuto;
  int last_spans_ = 1;
  int v8_min_units_ = -1;
  int v8_spans_ = 0;
  bool v8_aux_prep_ = false;
  // The span path's second stream (its M runs beside the N runs) and the
  // events that fork it from and join it to the caller's stream; created on
  // first use.
  cudaStream_t side_stream_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  // DeviceRunsV8's cache: the device it was read for (-1: none yet).
  mutable int v8_device_ = -1;
  mutable bool v8_device_ok_ = false;
};

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_CHUNKED_PREFILL_H_
