// The device steps of the v8 span path (span_plan.h) around its fused-kernel
// calls: the identity page of the M runs, the serial fixup of the span
// start states (phase 2) and the copy of the final state into the real
// pool. Host launchers; the kernels are in span_fixup.cu.
#ifndef GDN_KERNELS_CUDA_CHUNKED_SPAN_FIXUP_H_
#define GDN_KERNELS_CUDA_CHUNKED_SPAN_FIXUP_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/gdn_types.h"

namespace gdn::cuda::chunked {

struct SpanFixupArgs {
  // The scratch pool: page i at scratch + i * scratch_page_bytes, each a
  // dense [Hv][K][V] fp32 state whatever the real pages hold (bf16 scratch
  // pages would round N_p, M_p and Z_p once more per span: +2.5-4e-3 on o
  // with little decay, measured on the cpu); ids as SpanPages (span_plan.h).
  char* scratch = nullptr;
  int64_t scratch_page_bytes = 0;
  int spans = 0;
  // The real pool and the sequence's page ids (device arrays; element 0):
  // initial_pages[0] (kZeroStatePage: zero) and final_pages[0]. Ids
  // outside the pool make Z_0 NaN (so every o of the call is NaN) and the
  // final copy writes nothing, as the unsplit kernels do.
  char* pool_base = nullptr;
  int64_t page_bytes = 0;
  int32_t num_pages = 0;
  const int32_t* initial_pages = nullptr;
  const int32_t* final_pages = nullptr;
  // The sequence's prefix-state slots (GdnParams::checkpoint_pages of
  // sequence 0, checkpoint_count of them; 0: none): an id outside the pool
  // and not kZeroStatePage makes the call's ids unusable, as above. The
  // fixup writes phase 3's copy of the slots into checkpoint_copy: the ids,
  // or kZeroStatePage in every slot when the ids are unusable, so that
  // phase 3 (on NaN then) stores no prefix state.
  const int32_t* checkpoint_pages = nullptr;
  int32_t checkpoint_count = 0;
  int32_t* checkpoint_copy = nullptr;
  int num_v_heads = 0;
  StateDType state_dtype = StateDType::kF32;  // the real pages' (any dtype)
  // int8 / fp8 pages: the final copy encodes with kernels/state_quant.h's
  // codec, as every store of a state does; stochastic rounding is salted by
  // the gates of the sequence's last token (row last_token of [T, Hv]
  // salt_gate / salt_strength: g / beta, or the raw a / b with fused gating).
  bool stochastic_rounding = false;
  const float* salt_gate = nullptr;
  const float* salt_strength = nullptr;
  int64_t last_token = 0;
};

// K = V = 128 only (the fused kernel's shape); the real pool 16-byte
// aligned (base and page_bytes). Asynchronous on `stream`.
// The identity page (SpanPages::identity(): S[h] = I for every head).
cudaError_t LaunchSpanIdentity(const SpanFixupArgs& args, cudaStream_t stream);
// Z_0 from the initial page (any dtype), then Z_{p+1} = M_p Z_p + N_p for
// p = 0 .. P-2 in fp32, one block per (value head, 16 columns of V); and
// the copy of the checkpoint slots.
cudaError_t LaunchSpanFixup(const SpanFixupArgs& args, cudaStream_t stream);
// The scratch page SpanPages::last() into the real final page (rounded to
// nearest for bf16 pages, as the fused kernel stores; int8 / fp8 pages: the
// codes and column-pair scales of state_quant.h), when the real page ids are
// usable.
cudaError_t LaunchSpanFinalCopy(const SpanFixupArgs& args, cudaStream_t stream);

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_SPAN_FIXUP_H_
