// The recurrent GDN kernel family (decode, and prefill for now): the params
// struct the kernel receives by value, the block-shape variants, and the one
// host entry point that dispatches runtime options to a compiled instance.
//
// Host header: includes only the CUDA runtime API (for cudaStream_t), so .cc
// files (backend, C ABI, benchmark) include it without nvcc.
#ifndef GDN_KERNELS_CUDA_RECURRENT_PARAMS_H_
#define GDN_KERNELS_CUDA_RECURRENT_PARAMS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda {

// What the __global__ kernel reads. Every pointer is device memory. Tokens
// are packed over sequences (sequence i owns rows [cu_seqlens[i],
// cu_seqlens[i+1])).
struct RecurrentParams {
  const void* q = nullptr;  // [T, Hqk, K], input dtype
  const void* k = nullptr;  // [T, Hqk, K], input dtype
  const void* v = nullptr;  // [T, Hv, V],  input dtype
  void* o = nullptr;        // [T, Hv, V],  input dtype (written)

  const float* g = nullptr;        // [T, Hv]  direct gating
  const float* beta = nullptr;     // [T, Hv]  direct gating
  const float* a = nullptr;        // [T, Hv]  fused gating
  const float* b = nullptr;        // [T, Hv]  fused gating
  const float* A_log = nullptr;    // [Hv]     fused gating
  const float* dt_bias = nullptr;  // [Hv]     fused gating

  const int32_t* cu_seqlens = nullptr;     // [N + 1]
  const int32_t* initial_pages = nullptr;  // [N], kZeroStatePage = zero state
  const int32_t* final_pages = nullptr;    // [N]
  // Prefix states (GdnParams::checkpoint_interval; 0: none): sequence n's
  // m-th at checkpoint_pages[n * checkpoints_per_seq + m - 1].
  int32_t checkpoint_interval = 0;
  int32_t checkpoints_per_seq = 0;
  const int32_t* checkpoint_pages = nullptr;

  char* pool_base = nullptr;  // page p at pool_base + p * page_bytes
  int64_t page_bytes = 0;
  int32_t num_pages = 0;

  int32_t num_seqs = 0;      // N
  int32_t num_qk_heads = 0;  // Hqk
  int32_t num_v_heads = 0;   // Hv
  int32_t group_size = 1;    // Hv / Hqk
  float scale = 0.0f;        // applied to q (after the L2 norm)
  bool fused_gating = false;
  bool l2_norm_qk = false;
  // int8 / fp8 pages: stochastic rounding of stores (GdnOptions::
  // state_rounding; kernels/state_quant.h), else round to nearest.
  bool stochastic_rounding = false;
  // Programmatic dependent launch (LaunchRecurrent's `pdl`): the kernel was
  // launched with cudaLaunchAttributeProgrammaticStreamSerialization, so it
  // may start while the previous kernel on the stream still runs. It reads
  // its inputs (cu_seqlens, page ids, q/k/v, gates) before
  // griddepcontrol.wait and touches state pages and o only after it.
  bool pdl = false;
};

// Block shapes. One block owns one (sequence, value head, V tile) and all K
// rows of that tile, so batch 1 at Hv = 32 still spreads over most of the 132
// SMs. Per state dtype (each thread moves 16-byte vectors: 4 fp32 or 8 bf16
// state columns per row; int8 / fp8 8 columns, one 8-byte vector):
//   state fp32: kSmall V tile 16 / 64 threads, kWide 64 / 256 (capped at 64
//               registers for 4 resident blocks), kPersistent 32 / 128
//   state bf16: kSmall V tile 32 / 128 threads, kPersistent 64 / 128
//   state int8 / fp8: kSmall 32 / 128, kPersistent 64 / 128
// kSmall and kWide: one block per item (its tile loaded into registers).
// kPersistent: a persistent grid that streams the next item's tile into
// shared memory (cp.async, two buffers) while computing the current one.
// kWide is compiled for fp32 pages only (bf16 and int8 / fp8 pages:
// InvalidArgument), since kAuto never picks it for the others.
// kAuto picks per state dtype and grid size (ResolveRecurrentVariant; the
// thresholds come from bench/decode's sweep on the H200). The codes are the
// C ABI's (gdn_decode_variant): 2 (large: 32 / 128 fp32, 64 / 128 bf16) and
// 5 (deep: the persistent grid with a three-stage ring) were removed in
// issue 22, never picked by kAuto and slower than it on every row of
// bench/results/2026-11-29-decode-v2 and 2026-12-02-quantized-decode.
enum class RecurrentVariant : int {
  kAuto = 0,
  kSmall = 1,
  kWide = 3,
  kPersistent = 4,
};

// Whether `code` is a RecurrentVariant (0, 1, 3 or 4).
bool IsRecurrentVariantCode(int code);

const char* RecurrentVariantName(RecurrentVariant variant);

// The variant kAuto resolves to for this call (for logs and benchmarks).
RecurrentVariant ResolveRecurrentVariant(const GdnOptions& options,
                                         int32_t num_seqs,
                                         RecurrentVariant requested);

// Builds RecurrentParams from the operator's params (no host reads of
// device memory).
RecurrentParams MakeRecurrentParams(const GdnOptions& options,
                                    const GdnParams& params);

// Runs the recurrence over every token of every sequence on `stream`:
// asynchronous, no allocation, no synchronisation (safe inside CUDA graph
// capture). Each sequence's state goes through registers once per call; any
// number of tokens per sequence (chunks of 8 tokens staged in shared memory).
// Checks the options (unsupported shape or dtype: InvalidArgument naming it),
// 16-byte alignment of q/k/v/o/pool, and the launch. Page ids outside
// [0, num_pages) (other than kZeroStatePage for initial pages) are not read
// or written: that sequence's o is set to NaN instead.
//
// `pdl` launches with programmatic dependent launch (cudaLaunchKernelEx +
// cudaLaunchAttributeProgrammaticStreamSerialization; works in stream
// capture): the kernel's prologue (page ids, token staging) overlaps the
// tail of the previous kernel on the stream and griddepcontrol.wait orders
// every state-page read/write and o write after that kernel's completion.
// Precondition: the inputs (q, k, v, gates, cu_seqlens, page-id arrays) were
// not written by the immediately preceding *kernel* on the stream (a copy
// before the launch is fine: a memcpy dependency is never relaxed). Every
// kernel of the family triggers its dependents early
// (griddepcontrol.launch_dependents), whether or not it was launched so.
absl::Status LaunchRecurrent(const GdnOptions& options,
                             const RecurrentParams& params,
                             cudaStream_t stream,
                             RecurrentVariant variant = RecurrentVariant::kAuto,
                             bool pdl = false);

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_PARAMS_H_
