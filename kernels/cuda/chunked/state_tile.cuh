// The [K, VT] state tile of the chunked prefill's sequential pass (kernel 2,
// state_chain.cuh), held in registers as mma
// accumulators: warp w = 4 cw + rw holds state rows [rw K / 4, (rw + 1) K / 4)
// (MT 16-row tiles) and columns [e0, e0 + 8 NT) of the tile, in the C
// fragment layout of mma_16bit.cuh. Its page I/O and B-fragment loads, and
// the store of o that the passes share (output_pass.cuh too).
#ifndef GDN_KERNELS_CUDA_CHUNKED_STATE_TILE_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_STATE_TILE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/mma_16bit.cuh"
#include "kernels/cuda/chunked/state_pages.cuh"
#include "kernels/cuda/common/page_ids.cuh"
#include "kernels/cuda/common/state_codes.cuh"
#include "kernels/cuda/common/vector_access.cuh"
#include "kernels/gdn_params.h"
#include "kernels/state_quant.h"

namespace gdn::cuda::chunked {

// o [.., 2] at `at` in the call's input dtype.
__device__ __forceinline__ void StoreOutPair(void* o, int64_t at, DType dtype, float x0,
                                             float x1) {
  if (dtype == DType::kBF16) {
    StorePair(static_cast<bf16*>(o) + at, x0, x1);
  } else if (dtype == DType::kF16) {
    StorePair(static_cast<__half*>(o) + at, x0, x1);
  } else {
    StorePair(static_cast<float*>(o) + at, x0, x1);
  }
}

// kPair (1 or 2) B fragments of adjacent n-tiles (the transpose at tile_t),
// by ldmatrix.
template <int kPair, typename Op>
__device__ __forceinline__ void FragB(uint32_t b[4], const Op* tile_t, int stride, int lane) {
  if constexpr (kPair == 2) {
    LdsmB2(b, tile_t, stride, lane);
  } else {
    LdsmB1(b, tile_t, stride, lane);
  }
}

// One warp's share of a product on tensor cores: for ks = 0 .. kSteps - 1,
//   acc{ks % 2}[nt] += A[16 rows][16 ks .. 16 ks + 15] B[16 ks ..][8 nt .. 8 nt + 7]
// with A row-major at `a` (a_stride) and B's transpose at `b_t` ([n][k],
// b_stride), both Op in shared memory. acc0 and acc1 the same array: one
// chain (k-steps summed in order); different arrays: two chains of half the
// length, for the caller to add.
template <int kSteps, int NT, typename Op>
__device__ __forceinline__ void MmaRowTile(float (&acc0)[NT][4], float (&acc1)[NT][4],
                                           const Op* a, int a_stride, const Op* b_t,
                                           int b_stride, int lane) {
  constexpr int kPair = NT % 2 == 0 ? 2 : 1;  // n-tiles per B load
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    float(&acc)[NT][4] = ks % 2 == 0 ? acc0 : acc1;
    uint32_t af[4];
    LdsmA(af, a + ks * 16, a_stride, lane);
#pragma unroll
    for (int nt = 0; nt < NT; nt += kPair) {
      uint32_t bf[4];
      FragB<kPair>(bf, b_t + nt * 8 * b_stride + ks * 16, b_stride, lane);
#pragma unroll
      for (int j = 0; j < kPair; ++j) Mma16816<Op>(acc[nt + j], af, bf + 2 * j);
    }
  }
}

// o of a warp's 16 rows (16 rw ..) x 8 NT columns (col0 .. of head h) of a
// chunk starting at token chunk_t0, the rows below L only, in the call's dtype.
template <int V, int NT>
__device__ __forceinline__ void StoreOutRows(const ChunkArgs& args, const float (&acc)[NT][4],
                                             int chunk_t0, int L, int h, int col0, int rw,
                                             int lane) {
  const int group = lane >> 2, tig = lane & 3;
  const int64_t o_token = static_cast<int64_t>(args.num_v_heads) * V;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = rw * 16 + group + 8 * half;
      if (i < L) {
        StoreOutPair(args.o, (chunk_t0 + i) * o_token + h * V + col0 + nt * 8 + 2 * tig,
                     args.io_dtype, acc[nt][2 * half], acc[nt][2 * half + 1]);
      }
    }
}

// S = the initial page's tile (head h, columns v0 + e0 ..; zero for
// kZeroStatePage, NaN when !pages_ok), and its transpose in Op into
// sT_s[e][d] (`stride` elements per row e).
template <int K, int V, int MT, int NT, typename Op>
__device__ __forceinline__ void LoadInitialState(float (&S)[MT][NT][4], Op* sT_s, int stride,
                                                 const ChunkArgs& args, int n, int h, int v0,
                                                 int rw, int e0, int lane, bool pages_ok) {
  const int group = lane >> 2, tig = lane & 3;
  const int ip = args.initial_pages[n];
  const char* init = nullptr;  // the page; elements of args.state_dtype
  if (pages_ok && ip != kZeroStatePage) init = args.pool_base + ip * args.page_bytes;
  const int64_t tile_offset = static_cast<int64_t>(h) * K * V + v0;
  const int64_t codes_bytes = static_cast<int64_t>(args.num_v_heads) * K * V;  // int8 / fp8
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int d = rw * (K / 4) + mt * 16 + group + 8 * (r >> 1);
        const int e = e0 + nt * 8 + 2 * tig + (r & 1);
        float x = 0.f;
        if (!pages_ok) {
          x = __int_as_float(0x7fc00000);  // NaN
        } else if (init != nullptr) {
          x = PageElement(init, args.state_dtype, tile_offset + d * V + e, codes_bytes,
                          static_cast<int64_t>(h) * V + v0 + e);
        }
        S[mt][nt][r] = x;
        sT_s[e * stride + d] = OpFromFloat<Op>(x);
      }
}

// S^T in Op into sT_s[e][d], for the next chunk's products: one
// stmatrix.trans per two 16 x 8 blocks (per block when NT is odd).
template <int K, int MT, int NT, typename Op>
__device__ __forceinline__ void StoreStateTranspose(Op* sT_s, int stride,
                                                    const float (&S)[MT][NT][4], int rw, int e0,
                                                    int lane) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    Op* rows = sT_s + rw * (K / 4) + mt * 16;  // + e * stride
#pragma unroll
    for (int nt = 0; nt < NT; nt += NT % 2 == 0 ? 2 : 1) {
      if constexpr (NT % 2 == 0) {
        const uint32_t r[4] = {Pack2<Op>(S[mt][nt][0], S[mt][nt][1]),
                               Pack2<Op>(S[mt][nt][2], S[mt][nt][3]),
                               Pack2<Op>(S[mt][nt + 1][0], S[mt][nt + 1][1]),
                               Pack2<Op>(S[mt][nt + 1][2], S[mt][nt + 1][3])};
        StsmTrans16x8Pair(rows + (e0 + nt * 8) * stride, stride, r, lane);
      } else {
        const uint32_t r[2] = {Pack2<Op>(S[mt][nt][0], S[mt][nt][1]),
                               Pack2<Op>(S[mt][nt][2], S[mt][nt][3])};
        StsmTrans16x8(rows + (e0 + nt * 8) * stride, stride, r, lane);
      }
    }
  }
}

// Barrier over the chain warps only (named barrier 1; the o warps of the
// fused form never store states).
template <int kThreads>
__device__ __forceinline__ void ChainBarrier() {
  asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");
}

// int8 / fp8 store of the tile (kernels/state_quant.h): a thread's
// accumulators hold whole column pairs (2 tig, 2 tig + 1), i.e. whole scale
// groups; max |x| (AbsBits) over its rows, over the 8 lanes of its column
// pair (shuffles), then over the 4 row warps rw through amax_s [4][VT / 2]
// (kThreads chain threads, two named barriers); then the codes, and row
// warp 0 writes the scales. last_token: the state's last token (its gates
// salt stochastic rounding).
template <int K, int V, int VT, int MT, int NT, int kThreads>
__device__ __forceinline__ void StoreQuantStatePage(const ChunkArgs& args, char* fin, int h,
                                                    int v0, const float (&S)[MT][NT][4], int rw,
                                                    int e0, int lane, uint32_t* amax_s,
                                                    int64_t last_token) {
  static_assert(kStateScaleCols == 2, "a column pair per scale: the mma accumulator pair");
  const int group = lane >> 2, tig = lane & 3;
  uint32_t m[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    m[nt] = 0;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 4; ++r) m[nt] = max(m[nt], quant::AbsBits(S[mt][nt][r]));
#pragma unroll
    for (int offset = 4; offset < 32; offset *= 2) {
      m[nt] = max(m[nt], __shfl_xor_sync(0xffffffffu, m[nt], offset));
    }
  }
  ChainBarrier<kThreads>();  // an earlier store's readers of amax_s are done
  if (group == 0) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) amax_s[rw * (VT / 2) + (e0 + nt * 8) / 2 + tig] = m[nt];
  }
  ChainBarrier<kThreads>();
  const bool int8 = args.state_dtype == StateDType::kInt8;
  const bool stochastic = args.stochastic_rounding;
  const uint32_t salt = stochastic ? StoreSalt(args, last_token, h) : 0u;
  float scale[NT], inv[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    uint32_t a = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) a = max(a, amax_s[w * (VT / 2) + (e0 + nt * 8) / 2 + tig]);
    const quant::GroupScale gs = quant::GroupScaleFor(a, int8 ? quant::kInt8Max : quant::kFp8Max);
    scale[nt] = gs.scale;
    inv[nt] = gs.inv;
  }
  const int64_t tile_offset = static_cast<int64_t>(h) * K * V + v0;
  // The two codes of each column pair (one scale) through `encode`, one
  // loop per (dtype, rounding): nearest (common/state_codes.cuh) when the
  // rounding and the groups allow, no switch per element.
  auto store_pairs = [&](auto encode) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int d = rw * (K / 4) + mt * 16 + group + 8 * half;
          const int e = e0 + nt * 8 + 2 * tig;
          const int64_t at = tile_offset + d * V + e;
          *reinterpret_cast<uint16_t*>(fin + at) = static_cast<uint16_t>(
              encode(S[mt][nt][2 * half], S[mt][nt][2 * half + 1], inv[nt], at));
        }
  };
  bool finite = true;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) finite &= !(scale[nt] != scale[nt]);
  if (!stochastic && finite && int8) {
    store_pairs([](float x0, float x1, float inv, int64_t) {
      return __byte_perm(Int8NearestBits(__fmul_rn(x0, inv)), Int8NearestBits(__fmul_rn(x1, inv)),
                         0x0040u);
    });
  } else if (!stochastic && finite) {
    store_pairs([](float x0, float x1, float inv, int64_t) -> uint32_t {
      return Fp8PairNearest(__fmul_rn(x0, inv), __fmul_rn(x1, inv));
    });
  } else {
    store_pairs([&](float x0, float x1, float inv, int64_t at) {
      return EncodePageCode(int8, x0, inv, stochastic, salt, at) |
             static_cast<uint32_t>(EncodePageCode(int8, x1, inv, stochastic, salt, at + 1)) << 8;
    });
  }
  if (rw == 0 && group == 0) {
    float* scales = reinterpret_cast<float*>(fin + static_cast<int64_t>(args.num_v_heads) * K * V);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      scales[(static_cast<int64_t>(h) * V + v0 + e0 + nt * 8 + 2 * tig) / 2] = scale[nt];
    }
  }
}

// Page `page`'s tile (head h, columns v0 + e0 ..) = S, in the pages' dtype
// (the final page, or a checkpoint's). Every chain thread calls it (int8 /
// fp8 stores synchronise the chain warps: StoreQuantStatePage).
template <int K, int V, int VT, int MT, int NT, int kThreads>
__device__ __forceinline__ void StoreStatePage(const ChunkArgs& args, int page, int h, int v0,
                                               const float (&S)[MT][NT][4], int rw, int e0,
                                               int lane, uint32_t* amax_s, int64_t last_token) {
  const int group = lane >> 2, tig = lane & 3;
  char* fin = args.pool_base + static_cast<int64_t>(page) * args.page_bytes;
  if (IsQuantizedState(args.state_dtype)) {
    StoreQuantStatePage<K, V, VT, MT, NT, kThreads>(args, fin, h, v0, S, rw, e0, lane, amax_s,
                                                     last_token);
    return;
  }
  const bool f32_state = args.state_dtype == StateDType::kF32;
  const int64_t tile_offset = static_cast<int64_t>(h) * K * V + v0;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int d = rw * (K / 4) + mt * 16 + group + 8 * half;
        const int e = e0 + nt * 8 + 2 * tig;
        const int64_t at = tile_offset + d * V + e;
        if (f32_state) {
          StorePair(reinterpret_cast<float*>(fin) + at, S[mt][nt][2 * half],
                    S[mt][nt][2 * half + 1]);
        } else {
          StorePair(reinterpret_cast<bf16*>(fin) + at, S[mt][nt][2 * half],
                    S[mt][nt][2 * half + 1]);
        }
      }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_STATE_TILE_CUH_
