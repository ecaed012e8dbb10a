// int8 / fp8 state pages in the recurrent kernel family (device code): the
// one-byte element types, their scales' loads and the quantised tile store.
//
// Page layout (gdn_types.h StatePageLayout, kernels/state_quant.h): [Hv, K, V]
// one-byte codes, then fp32 scales [Hv, V / kStateScaleCols], one per
// (head, pair of columns) over all K rows. A thread of the recurrent kernel
// owns kCols = 16 adjacent columns (one 16-byte vector per row) of the
// rows r * kRowGroups + row_group, so it holds whole scale groups: its
// kCols / 2 scales are 32 contiguous bytes.
//
// Load: codes -> floats by UnpackState (ToFloat below), then times the
// scales (ApplyScales) once they are in registers (one-block kernel: read by
// each thread from the page; persistent kernels: cp.async into a per-stage
// shared slot by row group 0, visible after the block barrier that already
// follows the tile's wait).
// Store (StoreQuantTile): max |x| per pair over this thread's rows, then
// over the row groups of the warp (integer max shuffles on AbsBits, which
// keep NaN), then over the warps through shared memory (one barrier); then
// every element is encoded (state_quant.h, nearest or stochastic with the
// salt of the state's last token) and row group 0 writes the scales.
#ifndef GDN_KERNELS_CUDA_RECURRENT_QUANT_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_QUANT_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/recurrent_instances.h"
#include "kernels/gdn_types.h"
#include "kernels/state_quant.h"

namespace gdn::cuda {

template <typename StateT>
inline constexpr bool kQuantState = std::is_same_v<StateT, QInt8> || std::is_same_v<StateT, QFp8>;

__device__ __forceinline__ float ToFloat(QInt8 x) { return quant::DecodeInt8(x.code); }
__device__ __forceinline__ float ToFloat(QFp8 x) { return quant::DecodeFp8(x.code); }

template <typename StateT>
__device__ __forceinline__ uint8_t EncodeCode(float x, float inv, bool stochastic, uint32_t bits) {
  if constexpr (std::is_same_v<StateT, QInt8>) {
    return static_cast<uint8_t>(quant::EncodeInt8(x, inv, stochastic, bits));
  } else {
    return quant::EncodeFp8(x, inv, stochastic, bits);
  }
}

template <typename StateT>
inline constexpr float kQuantMax =
    std::is_same_v<StateT, QInt8> ? quant::kInt8Max : quant::kFp8Max;

// Byte offset of the scales in a page, and of scale `group` of head h.
__device__ __forceinline__ int64_t ScaleOffset(int num_v_heads, int K, int V, int h, int col) {
  return (int64_t)num_v_heads * K * V + ((int64_t)h * V + col) / kStateScaleCols * 4;
}

// This thread's kCols / kStateScaleCols scales (32 bytes for 16 columns)
// of page `page`, columns [col, col + kCols) of head h.
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

// s[r][c] *= scale of column c's group.
template <int kRows, int kCols>
__device__ __forceinline__ void ApplyScales(float (&s)[kRows][kCols], const float* scales) {
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kCols; ++c) s[r][c] *= scales[c / kStateScaleCols];
}

// 16-byte cp.async through L1 (the scales are shared by a tile's threads).
__device__ __forceinline__ void CopyScalesAsync(void* smem_dst, const void* global_src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global_src)
               : "memory");
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_QUANT_CUH_
