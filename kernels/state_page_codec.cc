#include "kernels/state_page_codec.h"

#include <algorithm>
#include <cstring>

#include "kernels/dtype_convert.h"
#include "kernels/state_quant.h"

namespace gdn {
namespace {

float* ScalesOf(const StatePageFormat& f, void* page) {
  return reinterpret_cast<float*>(static_cast<char*>(page) + f.state_bytes());
}
const float* ScalesOf(const StatePageFormat& f, const void* page) {
  return reinterpret_cast<const float*>(static_cast<const char*>(page) + f.state_bytes());
}

size_t ElementIndex(const StatePageFormat& f, int h, int k, int v) {
  return (size_t(h) * f.head_dim_k + k) * f.head_dim_v + v;
}

// One scale group (columns [c, c + scale_cols) of head h) into the page.
void EncodeGroup(const StatePageFormat& f, int h, int c, const float* values,
                 int64_t row_stride, int j0, uint32_t salt, void* page) {
  const bool int8 = f.dtype == StateDType::kInt8;
  const bool stochastic = f.rounding == StateRounding::kStochastic;
  uint32_t amax_bits = 0;
  for (int k = 0; k < f.head_dim_k; ++k) {
    for (int j = 0; j < f.scale_cols; ++j) {
      amax_bits = std::max(amax_bits, quant::AbsBits(values[k * row_stride + j0 + j]));
    }
  }
  const quant::GroupScale gs =
      quant::GroupScaleFor(amax_bits, int8 ? quant::kInt8Max : quant::kFp8Max);
  uint8_t* codes = static_cast<uint8_t*>(page);
  for (int k = 0; k < f.head_dim_k; ++k) {
    for (int j = 0; j < f.scale_cols; ++j) {
      const size_t at = ElementIndex(f, h, k, c + j);
      const float x = values[k * row_stride + j0 + j];
      const uint32_t bits = stochastic ? quant::ElementBits(salt, static_cast<uint32_t>(at)) : 0;
      codes[at] = int8 ? static_cast<uint8_t>(quant::EncodeInt8(x, gs.inv, stochastic, bits))
                       : quant::EncodeFp8(x, gs.inv, stochastic, bits);
    }
  }
  ScalesOf(f, page)[h * f.scales_per_head() + c / f.scale_cols] = gs.scale;
}

}  // namespace

StatePageFormat StatePageFormat::For(const GdnOptions& options) {
  StatePageFormat f;
  f.dtype = options.state_dtype;
  f.rounding = options.state_rounding;
  f.num_v_heads = options.shape.num_v_heads;
  f.head_dim_k = options.shape.head_dim_k;
  f.head_dim_v = options.shape.head_dim_v;
  return f;
}

void EncodeStateColumns(const StatePageFormat& f, int h, int c0, int n, const float* values,
                        int64_t row_stride, uint32_t salt, void* page) {
  switch (f.dtype) {
    case StateDType::kF32:
      for (int k = 0; k < f.head_dim_k; ++k) {
        std::memcpy(static_cast<float*>(page) + ElementIndex(f, h, k, c0),
                    values + k * row_stride, sizeof(float) * n);
      }
      return;
    case StateDType::kBF16:
      for (int k = 0; k < f.head_dim_k; ++k) {
        uint16_t* dst = static_cast<uint16_t*>(page) + ElementIndex(f, h, k, c0);
        for (int j = 0; j < n; ++j) dst[j] = FloatToBf16(values[k * row_stride + j]);
      }
      return;
    case StateDType::kInt8:
    case StateDType::kFP8:
      for (int j = 0; j < n; j += f.scale_cols) {
        EncodeGroup(f, h, c0 + j, values, row_stride, j, salt, page);
      }
      return;
  }
}

void DecodeStateColumns(const StatePageFormat& f, const void* page, int h, int c0, int n,
                        float* values, int64_t row_stride) {
  for (int k = 0; k < f.head_dim_k; ++k) {
    const size_t at = ElementIndex(f, h, k, c0);
    float* dst = values + k * row_stride;
    switch (f.dtype) {
      case StateDType::kF32:
        std::memcpy(dst, static_cast<const float*>(page) + at, sizeof(float) * n);
        break;
      case StateDType::kBF16:
        for (int j = 0; j < n; ++j) dst[j] = Bf16ToFloat(static_cast<const uint16_t*>(page)[at + j]);
        break;
      case StateDType::kInt8:
      case StateDType::kFP8: {
        const float* scales = ScalesOf(f, page) + h * f.scales_per_head();
        const uint8_t* codes = static_cast<const uint8_t*>(page) + at;
        for (int j = 0; j < n; ++j) {
          const float e = f.dtype == StateDType::kInt8
                              ? quant::DecodeInt8(static_cast<int8_t>(codes[j]))
                              : quant::DecodeFp8(codes[j]);
          dst[j] = e * scales[(c0 + j) / f.scale_cols];
        }
        break;
      }
    }
  }
}

void EncodeStatePage(const StatePageFormat& f, const float* state,
                     const std::vector<uint32_t>& salts, void* page) {
  const size_t head = size_t(f.head_dim_k) * f.head_dim_v;
  for (int h = 0; h < f.num_v_heads; ++h) {
    const uint32_t salt = salts.empty() ? 0 : salts[h];
    EncodeStateColumns(f, h, 0, f.head_dim_v, state + h * head, f.head_dim_v, salt, page);
  }
}

void DecodeStatePage(const StatePageFormat& f, const void* page, float* state) {
  const size_t head = size_t(f.head_dim_k) * f.head_dim_v;
  for (int h = 0; h < f.num_v_heads; ++h) {
    DecodeStateColumns(f, page, h, 0, f.head_dim_v, state + h * head, f.head_dim_v);
  }
}

std::vector<float> DecodeStatePage(const StatePageFormat& f, const void* page) {
  std::vector<float> state(f.elements());
  DecodeStatePage(f, page, state.data());
  return state;
}

void RoundTripState(const StatePageFormat& f, const std::vector<uint32_t>& salts,
                    std::vector<float>* state) {
  if (f.dtype == StateDType::kF32) return;
  std::vector<uint8_t> page(f.payload_bytes());
  EncodeStatePage(f, state->data(), salts, page.data());
  DecodeStatePage(f, page.data(), state->data());
}

float StatePageScale(const StatePageFormat& f, const void* page, int h, int j) {
  return ScalesOf(f, page)[h * f.scales_per_head() + j];
}

}  // namespace gdn
