// What TPrep (tprep.cuh; v8 chunked prefill, bench/prefill/HOPPER_DESIGN.md
// §4.7 step 2 and §5 step 1) writes: the per-chunk factors that the v8 fused
// kernel's "form P" reads instead of forming them itself. Plain structs, no
// CUDA includes.
//
// Per (global chunk c, value head h), index ch = c * Hv + h, and per
// (chunk c, q/k head hq), index cq = c * Hqk + hq. Chunk c covers tokens
// t0 .. t0 + L - 1 of its sequence (L <= 64); local rows i, columns j are
// token t0 + i, t0 + j; rows / columns >= L are the padding.
// With G the in-chunk cumulative log decay (G_i = g_0 + .. + g_i, padding
// g = 0, so G_i = G_{L-1} for i >= L), Gamma_ij = exp(G_i - G_j), rq / rk
// the inverse L2 norms of the raw q / k rows (1 without the L2 norm) and
//   T = (I + strictly_lower(beta_i Gamma_ij rk_i rk_j k_i . k_j))^-1
// (v7's decayed T, chunk_prep_blocked.cuh; padding beta = 0):
//   t_hi, t_lo [ch][64][64] Op  T'' = T diag(beta) = t_hi + t_lo (~2^-16 of
//                               the row, Op's two parts), row-major (i, j);
//                               zero above the diagonal and in padding rows
//                               and columns
//   p          [ch][64][64] Op  scale Gamma_ij rq_i rk_j q_i . k_j for
//                               j <= i < L, else 0; row-major (i, j)
//   g_cum      [ch][64] fp32    G_i (padding: G_{L-1})
//   eg         [ch][64] fp32    exp(G_i); 0 for padding
//   ed         [ch][64] fp32    exp(G_{L-1} - G_i); 0 for padding (the
//                               design's factor 0 of padding rows)
//   decay      [ch]     fp32    exp(G_{L-1})
//   rq, rk     [cq][64] fp32    inverse L2 norms (1 without the L2 norm);
//                               0 for padding; NEGATED for a row whose fp32
//                               sum of squares overflowed: the inverse norm
//                               of that row times kL2NormRescale (gdn_types.h),
//                               the factor the fused kernel applies to the
//                               raw row first
//   rescaled   [cq]     int32   1 when a row of the (chunk, q/k head) tile has
//                               a negated rq or rk, else 0
// Op is bf16, or fp16 for fp16 inputs (mma_16bit.cuh OperandFor). Every
// tile starts 256-byte aligned when the parts are laid out by TPrepLayout.
#ifndef GDN_KERNELS_CUDA_CHUNKED_TPREP_ARGS_H_
#define GDN_KERNELS_CUDA_CHUNKED_TPREP_ARGS_H_

#include <cstddef>
#include <cstdint>

namespace gdn::cuda::chunked {

struct TPrepWorkspace {
  uint16_t* t_hi = nullptr;
  uint16_t* t_lo = nullptr;
  uint16_t* p = nullptr;
  float* g_cum = nullptr;
  float* eg = nullptr;
  float* ed = nullptr;
  float* decay = nullptr;
  float* rq = nullptr;
  float* rk = nullptr;
  int32_t* rescaled = nullptr;
};

// Byte offsets of the parts above in one allocation of `total` bytes, each
// part 256-byte aligned.
struct TPrepLayout {
  size_t t_hi = 0, t_lo = 0, p = 0, g_cum = 0, eg = 0, ed = 0, decay = 0, rq = 0, rk = 0,
         rescaled = 0;
  size_t total = 0;
  TPrepLayout(int64_t num_chunks, int num_qk_heads, int num_v_heads) {
    const size_t tiles = static_cast<size_t>(num_chunks) * num_v_heads;
    const size_t qk_tiles = static_cast<size_t>(num_chunks) * num_qk_heads;
    size_t at = 0;
    auto take = [&](size_t bytes) {
      const size_t here = at;
      at += (bytes + 255) & ~static_cast<size_t>(255);
      return here;
    };
    t_hi = take(tiles * 64 * 64 * 2);
    t_lo = take(tiles * 64 * 64 * 2);
    p = take(tiles * 64 * 64 * 2);
    g_cum = take(tiles * 64 * 4);
    eg = take(tiles * 64 * 4);
    ed = take(tiles * 64 * 4);
    decay = take(tiles * 4);
    rq = take(qk_tiles * 64 * 4);
    rk = take(qk_tiles * 64 * 4);
    rescaled = take(qk_tiles * 4);
    total = at;
  }
  TPrepWorkspace At(void* base) const {
    char* b = static_cast<char*>(base);
    TPrepWorkspace ws;
    ws.t_hi = reinterpret_cast<uint16_t*>(b + t_hi);
    ws.t_lo = reinterpret_cast<uint16_t*>(b + t_lo);
    ws.p = reinterpret_cast<uint16_t*>(b + p);
    ws.g_cum = reinterpret_cast<float*>(b + g_cum);
    ws.eg = reinterpret_cast<float*>(b + eg);
    ws.ed = reinterpret_cast<float*>(b + ed);
    ws.decay = reinterpret_cast<float*>(b + decay);
    ws.rq = reinterpret_cast<float*>(b + rq);
    ws.rk = reinterpret_cast<float*>(b + rk);
    ws.rescaled = reinterpret_cast<int32_t*>(b + rescaled);
    return ws;
  }
};

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_TPREP_ARGS_H_
