// What the chunked prefill kernels receive by value: the operator's tensors,
// the chunk table and the per-chunk workspace. Plain struct, no CUDA
// includes (the launcher in a .cu file fills it).
//
// Chunks: every sequence is cut into chunks of kChunk = 64 tokens (the last
// one partial); chunks are numbered globally, sequence by sequence.
//   chunk_table[0 .. N]        first global chunk of sequence n (prefix sums,
//                              chunk_table[N] = num_chunks)
//   chunk_table[N + 1 + c]     the sequence that owns global chunk c
//
// Workspace, per (chunk c, value head h), index ch = c * Hv + h; every tile
// of the call's operand type (mma_16bit.cuh: bf16, fp16 for fp16 inputs),
// rows / columns of padding tokens (>= the chunk's length) are zero.
// With G the in-chunk cumulative log decay, kn / qn the normalised k / q,
// T = (I + strictly_lower(beta_i exp(G_i - G_j) kn_i . kn_j))^-1:
//   w    [ch][64][K]  T (beta exp(G) kn)                       (shared/GDN.md W)
//   u    [ch][64][V]  T (beta v)                               (U)
//   qg   [ch][64][K]  scale exp(G_i) qn_i
//   kdt  [ch][K][64]  exp(G_last - G_j) kn_j, transposed (k index major)
//   p    [ch][64][64] scale exp(G_i - G_j) qn_i . kn_j for j <= i, else 0
//   decay [ch]        exp(G_last) (fp32)
// and, with kernel 2's split form (ChunkedStatePass::kSplit) only, from its chain for the
// output pass:
//   hs   [ch][V][K]   S^T at the chunk's start (transposed: k index minor)
//   un   [ch][V][64]  U'^T = (U - W S)^T
#ifndef GDN_KERNELS_CUDA_CHUNKED_CHUNK_ARGS_H_
#define GDN_KERNELS_CUDA_CHUNKED_CHUNK_ARGS_H_

#include <cstdint>

#include "kernels/gdn_types.h"

namespace gdn::cuda::chunked {

inline constexpr int kChunk = 64;

struct ChunkArgs {
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
  const int32_t* chunk_table = nullptr;    // [N + 1 + num_chunks], see above
  const int32_t* initial_pages = nullptr;  // [N], kZeroStatePage = zero state
  const int32_t* final_pages = nullptr;    // [N]
  // Prefix states (GdnParams::checkpoint_interval, a multiple of kChunk; 0:
  // none): sequence n's m-th at checkpoint_pages[n * checkpoints_per_seq + m - 1].
  int32_t checkpoint_interval = 0;
  int32_t checkpoints_per_seq = 0;
  const int32_t* checkpoint_pages = nullptr;
  // The pool the checkpoint pages are in (MakeChunkArgs: the state pool
  // below). The span path's phase 3 runs on fp32 scratch pages and stores
  // its prefix states into the real pool, in its dtype (v8 only; its ids
  // were checked against that pool by the fixup).
  char* checkpoint_pool_base = nullptr;
  int64_t checkpoint_page_bytes = 0;
  StateDType checkpoint_dtype = StateDType::kF32;
  // The span path's phase 3 (v8 only): the sequences are the spans of one
  // sequence, cu_seqlens its span bounds from token 0, every inner bound a
  // multiple of checkpoint_interval. They share its slots: span n's m-th
  // prefix state is slot cu_seqlens[n] / interval + m - 1, the span's end
  // included unless it is the sequence's end. Its page ids were checked
  // before the call (span_fixup.h), so the kernel does not check them.
  bool spans_of_one_sequence = false;

  char* pool_base = nullptr;  // page p at pool_base + p * page_bytes
  int64_t page_bytes = 0;
  int32_t num_pages = 0;

  int32_t num_seqs = 0;      // N
  int32_t num_chunks = 0;    // sum over sequences of ceil(len / 64)
  int32_t num_qk_heads = 0;  // Hqk
  int32_t num_v_heads = 0;   // Hv
  int32_t group_size = 1;    // Hv / Hqk
  float scale = 0.0f;        // applied to q after the L2 norm
  bool fused_gating = false;
  bool l2_norm_qk = false;
  DType io_dtype = DType::kBF16;              // q, k, v, o
  StateDType state_dtype = StateDType::kF32;  // the pages
  bool stochastic_rounding = false;           // int8 / fp8 stores (state_quant.h)
  // Workspace (16-bit elements stored as uint16_t here; see the layout above).
  uint16_t* w = nullptr;
  uint16_t* u = nullptr;
  uint16_t* qg = nullptr;
  uint16_t* kdt = nullptr;
  uint16_t* p = nullptr;
  float* decay = nullptr;
  uint16_t* hs = nullptr;  // split form only
  uint16_t* un = nullptr;  // split form only
  // Split form only: the chain's progress flag per block (progress.cuh),
  // N * Hv * progress_tiles of them, progress_tiles = V / V tile, and this
  // call's epoch.
  unsigned long long* progress = nullptr;
  int32_t progress_tiles = 0;
  uint32_t epoch = 0;
};

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_CHUNK_ARGS_H_
