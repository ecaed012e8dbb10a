// The arguments of one Decode or Prefill call: plain pointers, shapes and page
// ids. The kernels know nothing of sessions; they see a batch of sequences,
// each reading its initial state from one page and writing its final state
// to another (or the same) page of the state pool.
//
// Every pointer except cu_seqlens_host is in the backend's memory (host memory
// for the cpu backend, device memory for cuda). Tensors are packed over the
// tokens of all sequences, sequence i owning rows
// [cu_seqlens[i], cu_seqlens[i+1]).
#ifndef GDN_KERNELS_GDN_PARAMS_H_
#define GDN_KERNELS_GDN_PARAMS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/gdn_types.h"

namespace gdn {

// Page id meaning "no stored state": the sequence starts from S = 0. In a
// checkpoint slot: no state is written there.
inline constexpr int32_t kZeroStatePage = -1;

// Checkpoint intervals are multiples of this many tokens (the chunked
// prefill's chunk).
inline constexpr int32_t kCheckpointTokens = 64;

// One allocation of equal pages. Page p starts at base + p * page_bytes.
struct StatePoolView {
  void* base = nullptr;
  int64_t page_bytes = 0;  // StatePageLayout::page_bytes
  int32_t num_pages = 0;
  StateDType dtype = StateDType::kF32;
};

struct GdnParams {
  int32_t num_seqs = 0;      // N
  int32_t total_tokens = 0;  // T = cu_seqlens[N]

  const int32_t* cu_seqlens = nullptr;       // [N + 1], backend memory
  const int32_t* cu_seqlens_host = nullptr;  // [N + 1], host copy (planning)

  const void* q = nullptr;  // [T, Hqk, K], options.input_dtype
  const void* k = nullptr;  // [T, Hqk, K], options.input_dtype
  const void* v = nullptr;  // [T, Hv, V],  options.input_dtype
  void* o = nullptr;        // [T, Hv, V],  options.input_dtype (written)

  // GatingMode::kDirect
  const float* g = nullptr;     // [T, Hv] log-space decay, <= 0
  const float* beta = nullptr;  // [T, Hv] in (0, 1)
  // GatingMode::kFused
  const float* a = nullptr;        // [T, Hv]
  const float* b = nullptr;        // [T, Hv]
  const float* A_log = nullptr;    // [Hv]
  const float* dt_bias = nullptr;  // [Hv]

  // Per sequence: the page its state is read from (kZeroStatePage: zero) and
  // the page its final state is written to. They may be equal (in place) or
  // differ (copy-on-write: the shared page is read, a private page written).
  const int32_t* initial_pages = nullptr;  // [N], backend memory
  const int32_t* final_pages = nullptr;    // [N], backend memory

  // Optional prefix states (0: none), so that a prefix of a prompt can later
  // be resumed or snapshotted: with checkpoint_interval = a positive multiple
  // of kCheckpointTokens, the state after the first m * checkpoint_interval
  // tokens of sequence i, for m = 1 .. CheckpointCount(len_i, interval) (the
  // multiples before its last token; the final page holds the state after
  // it), is written to page checkpoint_pages[i * checkpoints_per_seq + m - 1]
  // in the pool's dtype; kZeroStatePage in a slot skips that state. Slots
  // past a sequence's count are not read.
  // kPerTokenStates (1) instead writes the state after every token but the
  // last (slot j - 1: after token j), for calls whose every sequence has at
  // most kMaxDecodeTokens tokens: speculative drafts, whose accepted prefix
  // is then kept without recomputing it.
  int32_t checkpoint_interval = 0;
  int32_t checkpoints_per_seq = 0;
  const int32_t* checkpoint_pages = nullptr;  // [N * checkpoints_per_seq], backend memory

  StatePoolView pool;
};

// GdnParams::checkpoint_interval asking for the state after every token.
inline constexpr int32_t kPerTokenStates = 1;

// Checkpoints of a sequence of `len` tokens at `interval`: the multiples of
// the interval below len (none for interval <= 0). constexpr, so the CUDA
// kernels call it too (--expt-relaxed-constexpr).
constexpr int32_t CheckpointCount(int32_t len, int32_t interval) {
  return len > 0 && interval > 0 ? (len - 1) / interval : 0;
}

// Checks what can be checked on the host: non-null pointers for the options'
// gating mode, cu_seqlens_host monotone from 0 to total_tokens, each sequence
// within [1, max_tokens_per_seq] tokens (0 = unlimited), pool dtype and page
// size matching the options, and for checkpoints the interval and enough
// slots per sequence. Page ids are not read (they may be on the device).
// Returns InvalidArgument naming the field.
absl::Status ValidateParams(const GdnOptions& options, const GdnParams& params,
                            int max_tokens_per_seq);

}  // namespace gdn

#endif  // GDN_KERNELS_GDN_PARAMS_H_
