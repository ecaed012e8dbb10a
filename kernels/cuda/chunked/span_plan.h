// The v8 chunked prefill's span path (bench/prefill/HOPPER_DESIGN.md §4.7):
// one long sequence cut into P spans of whole chunks so that P times more
// CTAs walk its chain. Host arithmetic only (no CUDA), tested on the CPU.
//
// The transition of a span is affine in its start state (S is K x V, one per
// value head): S_end = M S_start + N, M (K x K) the chain run from the
// identity with v = 0, N the chain run from zero with the real v. So:
//   phase 1  spans 0 .. P-2: N_p (zero start) and M_p (identity start,
//            v = 0), 2 (P - 1) Hv CTAs, all at once;
//   phase 2  Z_0 = the sequence's initial state, Z_{p+1} = M_p Z_p + N_p
//            (a small serial fixup, p = 0 .. P-2);
//   phase 3  spans 0 .. P-1 from Z_p with the real v: o, and the last
//            span's end state (the final state), P Hv CTAs.
// Each phase walks T / P chunks, so the chain takes ~2 T / P chunk-steps
// instead of T: a gain from P = 3 on. TPrep (the per-chunk factors, chunk-
// local) runs once over the whole sequence and serves all three calls: spans
// are chunk-aligned, so a span call's chunk c is the sequence's chunk c.
#ifndef GDN_KERNELS_CUDA_CHUNKED_SPAN_PLAN_H_
#define GDN_KERNELS_CUDA_CHUNKED_SPAN_PLAN_H_

#include <cstdint>
#include <vector>

namespace gdn::cuda::chunked {

struct SpanPlan {
  // Token offsets of the span starts and the end: bounds[0] = 0 <
  // bounds[1] < ... < bounds[spans] = tokens; every inner bound a multiple
  // of 64 (kChunk) times the plan's unit. spans == 1: no split.
  std::vector<int32_t> bounds;
  int spans() const { return bounds.empty() ? 0 : static_cast<int>(bounds.size()) - 1; }
};

// Spans shorter than this many chunks are not worth the extra launches.
inline constexpr int kMinSpanChunks = 16;

// The plan for one sequence of `tokens` tokens with `num_v_heads` value
// heads on `sm_count` SMs (one fused-kernel CTA per SM), in units of
// `unit_chunks` chunks (a call with prefix states: its interval / kChunk,
// so that every inner bound is a checkpoint and each span's chunk ends are
// the sequence's; 1 otherwise):
// - forced_spans > 0: that many spans (fewer when the sequence has fewer
//   units), each at least one unit;
// - forced_spans == 0: the most spans with both phases in one wave
//   (2 (P - 1) Hv <= SMs and P Hv <= SMs) and spans of at least
//   kMinSpanChunks chunks, if that is 3 or more; else 1 (P = 2 walks as many
//   chunk-steps as no split, with more launches).
// Units are shared out as evenly as possible, earlier spans taking the
// remainder; the last span holds the partial unit and chunk, if any.
SpanPlan PlanSpans(int64_t tokens, int num_v_heads, int sm_count, int forced_spans,
                   int unit_chunks = 1);

// The unit of a call with prefix states every `checkpoint_interval` tokens
// (0: none): whole intervals, so that every span bound is a checkpoint (v8
// takes intervals that are multiples of kChunk only; others give 1).
inline int SpanUnitChunks(int32_t checkpoint_interval) {
  return checkpoint_interval >= 64 ? checkpoint_interval / 64 : 1;
}

// Scratch page ids of a span call with P spans (pages of the scratch pool,
// each one value head set [Hv][K][V] in the state dtype):
//   n(p), p < P-1: N_p, and the discarded end states of phase 3's spans
//   m(p), p < P-1: M_p
//   z(p), p < P:   Z_p, phase 3's start states
//   last():        phase 3's final state, copied to the real final page
//   identity():    the identity start of the M runs
struct SpanPages {
  int spans = 0;
  constexpr int n(int p) const { return p; }
  constexpr int m(int p) const { return spans - 1 + p; }
  constexpr int z(int p) const { return 2 * (spans - 1) + p; }
  constexpr int last() const { return 3 * spans - 2; }
  constexpr int identity() const { return 3 * spans - 1; }
  constexpr int count() const { return 3 * spans; }
};

// The device arrays of a span call, as host vectors (uploaded together):
//   cu_head    [P]      span starts of spans 0 .. P-2 and their end: the
//                       cu_seqlens of the phase-1 calls (P - 1 sequences)
//   cu_all     [P + 1]  plan.bounds: the cu_seqlens of phase 3
//   zero_init  [P - 1]  kZeroStatePage (the N runs)
//   n_pages    [P - 1]  N_p (phase 1 ends; phase 3's discarded ends too)
//   identity   [P - 1]  the identity page (the M runs)
//   m_pages    [P - 1]  M_p
//   z_pages    [P]      Z_p (phase 3 starts)
//   ends       [P]      N_0 .. N_{P-2}, last (phase 3 ends)
// laid out in that order in one int32 array; `offset` of each in elements.
struct SpanArrays {
  std::vector<int32_t> data;
  int cu_head = 0, cu_all = 0, zero_init = 0, n_pages = 0, identity = 0, m_pages = 0,
      z_pages = 0, ends = 0;
};
SpanArrays MakeSpanArrays(const SpanPlan& plan);

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_SPAN_PLAN_H_
