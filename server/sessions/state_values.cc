#include "server/sessions/state_values.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/dtype_convert.h"
#include "kernels/state_page_codec.h"
#include "kernels/state_quant.h"

namespace gdn {
namespace {

float ElementAt(const uint8_t* data, StateDType dtype, size_t i) {
  if (dtype == StateDType::kBF16) {
    uint16_t h;
    std::memcpy(&h, data + i * sizeof(h), sizeof(h));
    return Bf16ToFloat(h);
  }
  float f;
  std::memcpy(&f, data + i * sizeof(f), sizeof(f));  // bytes need no alignment
  return f;
}

absl::Status BadElement(int layer, size_t i, int64_t K, int64_t V, float x) {
  const size_t head = i / static_cast<size_t>(K * V);
  const size_t k = i / static_cast<size_t>(V) % static_cast<size_t>(K);
  const size_t v = i % static_cast<size_t>(V);
  return absl::InvalidArgumentError(absl::StrCat(
      "layer ", layer, ": state element ", i, " (head ", head, ", k ", k, ", v ", v, ") is ",
      x, "; a state must be finite with |x| <= ", kMaxStateMagnitude));
}

// int8 / fp8: scales, codes, then values (codes times scales).
absl::Status CheckQuantized(absl::Span<const uint8_t> bytes, const StatePageFormat& f,
                            int layer) {
  if (bytes.size() < f.payload_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", layer, ": ", bytes.size(), " bytes cannot hold a state of ", f.elements(), " ",
        StateDTypeName(f.dtype), " codes and their scales (", f.payload_bytes(), " bytes)"));
  }
  const size_t groups = f.scales_per_head();
  for (int h = 0; h < f.num_v_heads; ++h) {
    for (size_t j = 0; j < groups; ++j) {
      const float scale = StatePageScale(f, bytes.data(), h, static_cast<int>(j));
      // Written so that NaN fails it too.
      if (scale > 0.0f && scale <= kMaxStateMagnitude) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", layer, ": scale of head ", h, ", columns ", j * f.scale_cols, "..",
          (j + 1) * f.scale_cols - 1, " is ", scale, "; an ", StateDTypeName(f.dtype),
          " page's scales must be finite and > 0"));
    }
  }
  const size_t K = f.head_dim_k, V = f.head_dim_v;
  for (size_t i = 0; i < f.elements(); ++i) {
    const uint8_t code = bytes[i];
    const bool bad_code = f.dtype == StateDType::kInt8 ? code == 0x80u : (code & 0x7fu) == 0x7fu;
    if (bad_code) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", layer, ": state element ", i, " has ", StateDTypeName(f.dtype), " code 0x",
          absl::Hex(code), ", which no server writes (",
          f.dtype == StateDType::kInt8 ? "int8 codes are -127..127" : "fp8 NaN", ")"));
    }
  }
  std::vector<float> head(K * V);
  for (int h = 0; h < f.num_v_heads; ++h) {
    DecodeStateColumns(f, bytes.data(), h, 0, static_cast<int>(V), head.data(),
                       static_cast<int64_t>(V));
    for (size_t e = 0; e < head.size(); ++e) {
      if (!(std::fabs(head[e]) <= kMaxStateMagnitude)) {
        return BadElement(layer, h * K * V + e, K, V, head[e]);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckStateValues(absl::Span<const uint8_t> bytes, StateDType dtype,
                              int64_t num_v_heads, int64_t head_dim_k, int64_t head_dim_v,
                              int layer) {
  if (IsQuantizedState(dtype)) {
    StatePageFormat format;
    format.dtype = dtype;
    format.num_v_heads = static_cast<int>(num_v_heads);
    format.head_dim_k = static_cast<int>(head_dim_k);
    format.head_dim_v = static_cast<int>(head_dim_v);
    return CheckQuantized(bytes, format, layer);
  }
  const size_t elements = static_cast<size_t>(num_v_heads * head_dim_k * head_dim_v);
  if (bytes.size() / StateDTypeSize(dtype) < elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", layer, ": ", bytes.size(), " bytes cannot hold a state of ", elements, " ",
        StateDTypeName(dtype), " elements"));
  }
  for (size_t i = 0; i < elements; ++i) {
    const float x = ElementAt(bytes.data(), dtype, i);
    // Written so that NaN fails it too.
    if (std::fabs(x) <= kMaxStateMagnitude) continue;
    return BadElement(layer, i, head_dim_k, head_dim_v, x);
  }
  return absl::OkStatus();
}

}  // namespace gdn
