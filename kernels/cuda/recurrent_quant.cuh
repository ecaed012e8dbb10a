// int8 / fp8 state pages in the recurrent kernel family (device code): the
// one-byte element types' codecs, their scales' loads and the quantised tile
// store.
//
// Page layout (gdn_types.h StatePageLayout, kernels/state_quant.h): [Hv, K, V]
// one-byte codes, then fp32 scales [Hv, V / kStateScaleCols], one per
// (head, pair of columns) over all K rows. A thread of the recurrent kernel
// owns kCols = 8 adjacent columns (one 8-byte vector per row: two code
// words) of the rows r * kRowGroups + row_group, so it holds whole scale
// groups: its kCols / 2 = 4 scales are one 16-byte vector.
//
// Why 8 columns (not 16 like a 16-byte bf16 row): the per-token reduction
// over K and the store's max |x| run across the row groups of a warp and
// then across warps; their cost per thread is proportional to its columns,
// and the quantised path has no other use for wide rows.
//
// Element arithmetic. Every path gives the codes and values of
// state_quant.h's EncodeInt8 / EncodeFp8 / DecodeInt8 / DecodeFp8 bit for
// bit (tests/gpu/quantized_codec_test.cu sweeps them against the host):
//   int8 decode: byte ^ 0x80 becomes the low mantissa byte of 2^23 (one
//     byte permute), minus 2^23 + 128 (exact);
//   fp8 decode: cvt.rn.f16x2.e4m3x2 (two codes, exact), half -> float;
//   int8 / fp8 encode, nearest: common/state_codes.cuh (y + 1.5 * 2^23;
//     cvt.rn.satfinite.e4m3x2.f32);
//   stochastic rounding and groups with a NaN scale (an Inf / NaN element:
//     the hardware would give NaN codes where EncodeInt8 / EncodeFp8 clamp)
//     take state_quant.h's software encoders.
#ifndef GDN_KERNELS_CUDA_RECURRENT_QUANT_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_QUANT_CUH_

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/common/state_codes.cuh"
#include "kernels/cuda/common/vector_access.cuh"
#include "kernels/cuda/recurrent_instances.h"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/gdn_types.h"
#include "kernels/state_quant.h"

namespace gdn::cuda {

template <typename StateT>
inline constexpr bool kQuantState = std::is_same_v<StateT, QInt8> || std::is_same_v<StateT, QFp8>;

template <typename StateT>
inline constexpr float kQuantMax =
    std::is_same_v<StateT, QInt8> ? quant::kInt8Max : quant::kFp8Max;

// ---- codecs: 4 codes of one 32-bit word (byte i = column i) ----------------

// Codes -> values before the scale (exact; DecodeInt8 / DecodeFp8).
template <typename StateT>
__device__ __forceinline__ void DecodeCodeWord(uint32_t word, float* out) {
  if constexpr (std::is_same_v<StateT, QInt8>) {
    const uint32_t biased = word ^ 0x80808080u;  // code + 128 in each byte
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // bytes [code_i + 128, 0, 0, 0x4b]: the float 2^23 + code_i + 128.
      out[i] = __uint_as_float(__byte_perm(biased, 0x4b000000u, 0x7440u + i)) - 8388736.0f;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
          static_cast<__nv_fp8x2_storage_t>(word >> (16 * i)), __NV_E4M3);
      const float2 f = __half22float2(__half2(h));
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
}

// Round-to-nearest codes of y = x * inv, 4 values of a finite group (scale
// not NaN) -> one word; EncodeInt8 / EncodeFp8(x, inv, false, 0) bit for bit
// (common/state_codes.cuh).
template <typename StateT>
__device__ __forceinline__ uint32_t EncodeNearestWord(const float* y) {
  if constexpr (std::is_same_v<StateT, QInt8>) {
    uint32_t t[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) t[i] = Int8NearestBits(y[i]);
    return __byte_perm(__byte_perm(t[0], t[1], 0x0040u), __byte_perm(t[2], t[3], 0x0040u),
                       0x5410u);
  } else {
    return Fp8NearestWord(y);
  }
}

// state_quant.h's encoder (stochastic rounding; NaN groups): one code.
template <typename StateT>
__device__ __forceinline__ uint32_t EncodeSoftware(float x, float inv, bool stochastic,
                                                   uint32_t bits) {
  if constexpr (std::is_same_v<StateT, QInt8>) {
    return static_cast<uint8_t>(quant::EncodeInt8(x, inv, stochastic, bits));
  } else {
    return quant::EncodeFp8(x, inv, stochastic, bits);
  }
}

// ---- scales -----------------------------------------------------------------

// Byte offset of the scales in a page, and of the scale of column `col` of
// head h.
__device__ __forceinline__ int64_t ScaleOffset(int num_v_heads, int K, int V, int h, int col) {
  return (int64_t)num_v_heads * K * V + ((int64_t)h * V + col) / kStateScaleCols * 4;
}

// This thread's kCols / kStateScaleCols scales (16 bytes for 8 columns).
template <int kCols>
struct ThreadScales {
  static constexpr int kGroups = kCols / kStateScaleCols;
  static_assert(kGroups % 4 == 0, "whole 16-byte vectors of scales");
  float s[kGroups];
};

template <int kCols>
__device__ __forceinline__ void LoadThreadScales(const char* page, int64_t offset,
                                                 ThreadScales<kCols>& out) {
  const uint4* src = reinterpret_cast<const uint4*>(page + offset);
#pragma unroll
  for (int i = 0; i < ThreadScales<kCols>::kGroups / 4; ++i) {
    const uint4 v = __ldg(src + i);
    out.s[4 * i + 0] = __uint_as_float(v.x);
    out.s[4 * i + 1] = __uint_as_float(v.y);
    out.s[4 * i + 2] = __uint_as_float(v.z);
    out.s[4 * i + 3] = __uint_as_float(v.w);
  }
}

// s[r][c] *= (scale of column c's group) * decay: the decoded codes become
// the decayed state exp(g_0) S of the item's first token in one multiply
// per element (recurrent_quant_token.cuh); decay = 1 for an item without
// tokens (its state is stored as read).
template <int kRows, int kCols>
__device__ __forceinline__ void ApplyScales(float (&s)[kRows][kCols], const float* scales,
                                            float decay) {
  float factor[kCols / kStateScaleCols];
#pragma unroll
  for (int g = 0; g < kCols / kStateScaleCols; ++g) factor[g] = scales[g] * decay;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kCols; ++c) s[r][c] *= factor[c / kStateScaleCols];
}

// ---- the store --------------------------------------------------------------

// max(m, |x|) keeping NaN (max.NaN returns the canonical NaN 0x7fffffff,
// above +Inf as bits): the AbsBits max of state_quant.h, one instruction.
__device__ __forceinline__ float MaxAbsNaN(float m, float x) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(m), "f"(fabsf(x)));
  return r;
}

// One row's code words (sizeof(RowBits) / 4 of them) to the page, streamed.
template <typename RowBits>
__device__ __forceinline__ void StoreCodeRow(char* dst, const uint32_t* words) {
  RowBits raw;
  memcpy(&raw, words, sizeof(raw));
  StoreStreaming<RowBits>(dst, raw);
}

// The int8 / fp8 store of a [K, kVTile] tile held as Shape's thread layout
// (s: this thread's rows r * kRowGroups + row_group, columns [col, col +
// kCols) of head `head`, col = col0 + col_group * kCols) into the page at
// page_base:
//   max |x| per group over this thread's rows, then over the row groups of
//   the warp (integer max shuffles on the bits), then over the warps through
//   amax_smem [kWarps][kVTile / kStateScaleCols] (one barrier: every thread
//   of the block calls this). No barrier before the writes: the caller
//   passes a buffer whose previous readers are past a block barrier
//   (recurrent_kernel.cuh StoreTile);
//   lane g of each warp finishes group g (GroupScaleFor: two divisions per
//   lane, not per group and thread) and hands the inverses to the lanes that
//   own the group's columns by shuffles; warp 0 writes the scales;
//   codes by the nearest fast path, or the software encoders (stochastic,
//   with `salt`; or a group with a NaN scale).
template <typename Shape, bool kStochastic>
__device__ __forceinline__ void StoreQuantTileAs(
    char* page_base, int num_v_heads, int head, int col0, uint32_t* amax_smem, uint32_t salt,
    const float (&s)[Shape::kRowsPerThread][Shape::kCols]) {
  using StateT = typename Shape::StateT;
  using RowBits = typename Shape::RowBits;
  constexpr int kCols = Shape::kCols;
  constexpr int kRows = Shape::kRowsPerThread;
  constexpr int kGroups = kCols / kStateScaleCols;  // this thread's scale groups
  constexpr int kThreadsPerRow = Shape::kThreadsPerRow;
  constexpr int kTileGroups = Shape::kVTile / kStateScaleCols;
  constexpr int kWords = kCols / 4;
  static_assert(kCols % 4 == 0, "whole code words");
  static_assert(kTileGroups <= 32, "one lane per group of the tile");
  static_assert(sizeof(RowBits) == kCols, "one vector of codes per row");
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col_group = threadIdx.x % kThreadsPerRow;
  const int row_group = threadIdx.x / kThreadsPerRow;
  uint32_t m[kGroups];
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    float f = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < kStateScaleCols; ++c) f = MaxAbsNaN(f, s[r][g * kStateScaleCols + c]);
    m[g] = __float_as_uint(f);
#pragma unroll
    for (int offset = kThreadsPerRow; offset < 32; offset *= 2) {
      m[g] = max(m[g], __shfl_xor_sync(0xffffffffu, m[g], offset));
    }
  }
  if (lane < kThreadsPerRow) {
#pragma unroll
    for (int g = 0; g < kGroups; ++g) amax_smem[warp * kTileGroups + lane * kGroups + g] = m[g];
  }
  __syncthreads();
  const int my_group = lane % kTileGroups;  // lanes past the tile's groups repeat them
  uint32_t amax = 0;
#pragma unroll
  for (int w = 0; w < Shape::kWarps; ++w) amax = max(amax, amax_smem[w * kTileGroups + my_group]);
  const quant::GroupScale gs = quant::GroupScaleFor(amax, kQuantMax<StateT>);
  const uint32_t nan_groups = __ballot_sync(0xffffffffu, amax >= 0x7f800000u);
  float inv[kGroups];
#pragma unroll
  for (int g = 0; g < kGroups; ++g) inv[g] = __shfl_sync(0xffffffffu, gs.inv, col_group * kGroups + g);
  const bool nan_group = ((nan_groups >> (col_group * kGroups)) & ((1u << kGroups) - 1u)) != 0;
  if (warp == 0 && lane < kTileGroups) {
    reinterpret_cast<float*>(page_base + ScaleOffset(num_v_heads, Shape::kK, Shape::kV, head,
                                                     col0))[lane] = gs.scale;
  }
  // Element index of this thread's first code in the page; rows follow at
  // kRowStride (constant offsets from one pointer).
  constexpr int kRowStride = Shape::kRowGroups * Shape::kV;
  const int64_t at0 =
      ((int64_t)head * Shape::kK + row_group) * Shape::kV + col0 + col_group * kCols;
  char* dst = page_base + at0;
  if (!kStochastic && !nan_group) {  // one branch per tile, not per row
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      uint32_t words[kWords];
#pragma unroll
      for (int w = 0; w < kWords; ++w) {
        float y[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          // Rounded on its own, as in state_quant.h (never fused with the
          // int8 encoder's add).
          y[i] = __fmul_rn(s[r][4 * w + i], inv[(4 * w + i) / kStateScaleCols]);
        }
        words[w] = EncodeNearestWord<StateT>(y);
      }
      StoreCodeRow<RowBits>(dst + r * kRowStride, words);
    }
  } else {
    // ElementBits(salt, index + c) = Hash32((index + c) ^ salt): index is a
    // multiple of kCols (col0 and V are), so index + c = index | c and the
    // key is (index ^ salt) ^ c. Keyed on the salt (loaded here, after the
    // token loop), the kRows * kCols keys cannot be hoisted out of the item:
    // as index + c they were, one register each across the token loop.
    static_assert((kCols & (kCols - 1)) == 0, "c only in the low bits of index + c");
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const uint32_t key = (static_cast<uint32_t>(at0) + r * kRowStride) ^ salt;
      uint32_t words[kWords];
#pragma unroll
      for (int w = 0; w < kWords; ++w) {
        words[w] = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int c = 4 * w + i;
          const uint32_t bits = kStochastic ? quant::Hash32(key ^ static_cast<uint32_t>(c)) : 0u;
          words[w] |= EncodeSoftware<StateT>(s[r][c], inv[c / kStateScaleCols], kStochastic,
                                             bits)
                      << (8 * i);
        }
      }
      StoreCodeRow<RowBits>(dst + r * kRowStride, words);
    }
  }
}

// The store with the rounding of p (a warp-uniform branch: the nearest
// instance computes no hashes); last_token: the token whose gates salt
// stochastic rounding.
template <typename Shape>
__device__ __forceinline__ void StoreQuantTile(
    const RecurrentParams& p, uint32_t* amax_smem, int head, int col0, int page,
    const float (&s)[Shape::kRowsPerThread][Shape::kCols], int64_t last_token) {
  char* base = p.pool_base + (int64_t)page * p.page_bytes;
  if (p.stochastic_rounding) {
    const int64_t gi = last_token * p.num_v_heads + head;
    const uint32_t salt = p.fused_gating ? quant::RoundingSalt(p.a[gi], p.b[gi])
                                         : quant::RoundingSalt(p.g[gi], p.beta[gi]);
    StoreQuantTileAs<Shape, true>(base, p.num_v_heads, head, col0, amax_smem, salt, s);
  } else {
    StoreQuantTileAs<Shape, false>(base, p.num_v_heads, head, col0, amax_smem, 0u, s);
  }
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_QUANT_CUH_
