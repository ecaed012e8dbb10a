// Tensor-core products of kernel 1 (chunk_prep_blocked.cuh) whose fp32
// factors enter as two 16-bit parts, hi + lo (~2^-16 relative, fp32
// accumulate): T = (I + A)^-1 is built and applied in fp32 precision on
// mma.sync, where a single bf16 rounding of T carried into W and U would
// limit rows of nearly equal tokens (see chunk_prep_blocked.cuh).
//   SplitBf16      fp32 pair -> bf16 hi and lo registers
//   SplitMmaBlock  C = sign sum_q X_q Y_q, 16 x 16 fp32 blocks (T's merges)
//   TProductTo     out = (T diag(col_scale)) X, one warp's share (W and U)
#ifndef GDN_KERNELS_CUDA_CHUNKED_SPLIT_PRODUCTS_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_SPLIT_PRODUCTS_CUH_

#include <cstdint>

#include "kernels/cuda/chunked/mma_16bit.cuh"

namespace gdn::cuda::chunked {

// Two fp32 -> bf16 hi and lo parts: x ~ hi + lo to ~2^-16 relative.
__device__ __forceinline__ void SplitBf16(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  hi = Pack2<bf16>(x0, x1);
  const float2 hf = Unpack2<bf16>(hi);
  lo = Pack2<bf16>(x0 - hf.x, x1 - hf.y);
}

// C = sign * sum_q X_q Y_q for 16 x 16 fp32 blocks in shared memory (row
// stride kSF; X_q as [m][k], Y_q as [k][n]), by one warp on tensor cores in
// split bf16 (lo hi + hi lo + hi hi, fp32 accumulate: ~2^-16 relative, where
// the fp32 FMA form of step 2b/2c read one shared-memory element per FMA;
// bf16 whatever Op: A's decays may be far below fp16's range).
template <int kSF, int kTerms>
__device__ __forceinline__ void SplitMmaBlock(const float* const (&X)[kTerms],
                                              const float* const (&Y)[kTerms], float* C,
                                              float sign, int lane) {
  const int g = lane >> 2, t = lane & 3;
  float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
  for (int q = 0; q < kTerms; ++q) {
    uint32_t ah[4], al[4];
    const float* x = X[q];
#pragma unroll
    for (int e = 0; e < 4; ++e) {  // a[e]: rows g (+ 8 for odd e), columns 2 t (+ 8 for e >= 2)
      const float2 v = *reinterpret_cast<const float2*>(x + (g + 8 * (e & 1)) * kSF + 2 * t +
                                                        8 * (e >> 1));
      SplitBf16(v.x, v.y, ah[e], al[e]);
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const float* y = Y[q] + nt * 8 + g;  // column 8 nt + g; b[e]: rows 2 t (+ 8 for e = 1)
      uint32_t bh[2], bl[2];
      SplitBf16(y[2 * t * kSF], y[(2 * t + 1) * kSF], bh[0], bl[0]);
      SplitBf16(y[(2 * t + 8) * kSF], y[(2 * t + 9) * kSF], bh[1], bl[1]);
      Mma16816<bf16>(acc[nt], al, bh);
      Mma16816<bf16>(acc[nt], ah, bl);
      Mma16816<bf16>(acc[nt], ah, bh);
    }
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    *reinterpret_cast<float2*>(C + g * kSF + nt * 8 + 2 * t) =
        make_float2(sign * acc[nt][0], sign * acc[nt][1]);
    *reinterpret_cast<float2*>(C + (g + 8) * kSF + nt * 8 + 2 * t) =
        make_float2(sign * acc[nt][2], sign * acc[nt][3]);
  }
}

// out = (T diag(col_scale)) X on tensor cores, one warp's share: T fp32
// [64][kSF] in shared memory (lower triangular by 16 x 16 blocks; blocks
// above the diagonal are not read), col_scale [64] fp32, X Op [64][N] (row
// stride x_stride) in shared memory, out Op [64][N] (row stride out_stride)
// in global or shared memory. The left factor enters as hi + lo Op parts
// (two mma per product, fp32 accumulate), so T's rounding does not limit W
// and U. Row block mt needs mt + 1 k-steps, so warp w takes the row blocks
// w % 2 and 3 - w % 2 (5 k-steps either way) and the N / 4 columns from
// (w / 2) N / 4: every warp the same work.
template <typename Op, int N, int kSF>
__device__ __forceinline__ void TProductTo(const float* T, const float* col_scale, const Op* X,
                                           int x_stride, Op* out, int out_stride, int warp,
                                           int lane) {
  static_assert(N % 64 == 0, "N / 4 columns in 16-column pairs of n-tiles");
  const int tig = lane & 3;
#pragma unroll
  for (int pass = 0; pass < 2; ++pass) {
    const int mt = pass == 0 ? (warp & 1) : 3 - (warp & 1);
    const int row = mt * 16 + (lane >> 2);
    uint32_t ah[4][4], al[4][4];  // k-step ks: T columns 16 ks .. (zero for ks > mt)
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int e = 0; e < 4; ++e) {  // a[e]: row + 8 (e & 1), columns 2 tig + 8 (e >> 1), + 1
        const int j = ks * 16 + 2 * tig + 8 * (e >> 1);
        float2 x = make_float2(0.f, 0.f);
        if (ks <= mt) {
          x = *reinterpret_cast<const float2*>(T + (row + 8 * (e & 1)) * kSF + j);
          x.x *= col_scale[j];
          x.y *= col_scale[j + 1];
        }
        ah[ks][e] = Pack2<Op>(x.x, x.y);
        const float2 h = Unpack2<Op>(ah[ks][e]);
        al[ks][e] = Pack2<Op>(x.x - h.x, x.y - h.y);
      }
#pragma unroll
    for (int np = 0; np < N / 64; ++np) {
      const int n0 = (warp >> 1) * (N / 4) + np * 16;
      float acc0[4] = {0.f, 0.f, 0.f, 0.f}, acc1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        if (ks > mt) break;  // T's blocks above the diagonal are zero
        uint32_t bf[4];
        LdsmB2Trans(bf, X + ks * 16 * x_stride + n0, x_stride, lane);
        Mma16816<Op>(acc0, al[ks], bf);
        Mma16816<Op>(acc1, al[ks], bf + 2);
        Mma16816<Op>(acc0, ah[ks], bf);
        Mma16816<Op>(acc1, ah[ks], bf + 2);
      }
      StoreOpPair(out + row * out_stride + n0 + 2 * tig, acc0[0], acc0[1]);
      StoreOpPair(out + (row + 8) * out_stride + n0 + 2 * tig, acc0[2], acc0[3]);
      StoreOpPair(out + row * out_stride + n0 + 8 + 2 * tig, acc1[0], acc1[1]);
      StoreOpPair(out + (row + 8) * out_stride + n0 + 8 + 2 * tig, acc1[2], acc1[3]);
    }
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_SPLIT_PRODUCTS_CUH_
