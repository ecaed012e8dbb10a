// The GDN recurrence of one work item on the cpu, in fp32 (shared/GDN.md):
// one (sequence, value head) and a range of its V columns (the columns of the
// state never mix, so a head may be split across threads by columns). The
// state is held in fp32 for all tokens of the call and, for bf16 storage,
// rounded once when it is stored at the end. Per token each 16-column slab of
// the state is swept once: the sweep that writes S = exp(g_t) S + k_t u_t^T
// also accumulates S^T k_{t+1} and S^T q_{t+1} for the next token; slabs are
// 8 KiB (K = 128) and stay in L1 across the tokens.
#ifndef GDN_KERNELS_CPU_RECURRENCE_KERNEL_H_
#define GDN_KERNELS_CPU_RECURRENCE_KERNEL_H_

#include <cstddef>
#include <cstdint>

#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn::cpu {

// Everything one work item touches.
struct HeadTask {
  int64_t first_token = 0;  // rows [first_token, end_token) of the packed tensors
  int64_t end_token = 0;
  int32_t head = 0;         // value head h
  int32_t v_begin = 0;      // columns [v_begin, v_end) of V, multiples of 16
  int32_t v_end = 0;
  // The pages (all Hv heads, pool dtype) the state is read from (null: zero
  // state) and written to; they may be the same page.
  const void* initial_page = nullptr;
  void* final_page = nullptr;
  // Prefix states (GdnParams::checkpoint_interval): after every
  // checkpoint_interval tokens, checkpoint_count times, the state goes to
  // page checkpoint_pages[m] of the call's pool (kZeroStatePage: skipped).
  int32_t checkpoint_interval = 0;
  int32_t checkpoint_count = 0;
  const int32_t* checkpoint_pages = nullptr;
};

// Width of the column slabs; v_begin / v_end are multiples of it.
inline constexpr int kColumnTile = 16;

// Floats of per-thread scratch RunHead needs (fp32 slabs of the state, a
// block of prepared tokens), for the largest supported shape.
size_t ScratchFloats();

// Runs the recurrence of one work item. Options and params must have been
// validated (K, V in {64, 128}); scratch holds ScratchFloats() floats.
void RunHead(const GdnOptions& options, const GdnParams& params,
             const HeadTask& task, float* scratch);

// Which code path RunHead uses on this machine: "avx2+fma" or "generic".
const char* KernelIsa();

// false: RunHead takes the generic path even where AVX2 + FMA exist (so tests
// cover both builds of the kernel on one machine). Process-wide.
void AllowAvx2ForTesting(bool allow);

}  // namespace gdn::cpu

#endif  // GDN_KERNELS_CPU_RECURRENCE_KERNEL_H_
