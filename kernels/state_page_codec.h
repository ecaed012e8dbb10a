// Host-side reads and writes of state pages in any StateDType: fp32 values
// <-> the page bytes of StatePageLayout (codes + scales for int8 / fp8, with
// the arithmetic of state_quant.h). Used by the CPU backend (per column
// slab), the test and benchmark staging of pages, import checks and the
// drift study. No CUDA.
#ifndef GDN_KERNELS_STATE_PAGE_CODEC_H_
#define GDN_KERNELS_STATE_PAGE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/gdn_types.h"

namespace gdn {

// What a store needs to know about the page format.
struct StatePageFormat {
  StateDType dtype = StateDType::kF32;
  StateRounding rounding = StateRounding::kNearest;
  int num_v_heads = 0;  // Hv
  int head_dim_k = 0;   // K
  int head_dim_v = 0;   // V
  // Columns per scale (int8 / fp8). kStateScaleCols in every page a server
  // or kernel writes; other widths only for the drift study's comparison
  // (bench/eval), on buffers of their own.
  int scale_cols = kStateScaleCols;

  static StatePageFormat For(const GdnOptions& options);

  size_t elements() const { return size_t(num_v_heads) * head_dim_k * head_dim_v; }
  size_t state_bytes() const { return elements() * StateDTypeSize(dtype); }
  size_t scales_per_head() const { return size_t(head_dim_v / scale_cols); }
  // Bytes of codes + scales (no padding); the page itself may be longer.
  size_t payload_bytes() const {
    return state_bytes() + (IsQuantizedState(dtype) ? num_v_heads * scales_per_head() * 4 : 0);
  }
};

// Columns [c0, c0 + n) of head h (all K rows) from / to a page: element
// (k, c0 + j) is values[k * row_stride + j]. c0 and n are multiples of
// format.scale_cols for int8 / fp8 (a store sets the scales of exactly
// those groups). `salt` seeds stochastic rounding (state_quant.h
// RoundingSalt); fp32 stores copy, bf16 stores round to nearest even.
void EncodeStateColumns(const StatePageFormat& format, int h, int c0, int n,
                        const float* values, int64_t row_stride, uint32_t salt, void* page);
void DecodeStateColumns(const StatePageFormat& format, const void* page, int h, int c0, int n,
                        float* values, int64_t row_stride);

// A whole state [Hv, K, V] (V fastest) from / to a page; every head uses
// salts[h] (empty: 0 for every head).
void EncodeStatePage(const StatePageFormat& format, const float* state,
                     const std::vector<uint32_t>& salts, void* page);
void DecodeStatePage(const StatePageFormat& format, const void* page, float* state);
std::vector<float> DecodeStatePage(const StatePageFormat& format, const void* page);

// The values a store followed by a load leaves: state -> page -> state.
void RoundTripState(const StatePageFormat& format, const std::vector<uint32_t>& salts,
                    std::vector<float>* state);

// The scale of group j of head h in an int8 / fp8 page.
float StatePageScale(const StatePageFormat& format, const void* page, int h, int j);

}  // namespace gdn

#endif  // GDN_KERNELS_STATE_PAGE_CODEC_H_
