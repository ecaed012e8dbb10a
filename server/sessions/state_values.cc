#include "server/sessions/state_values.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/dtype_convert.h"

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

}  // namespace

absl::Status CheckStateValues(absl::Span<const uint8_t> bytes, StateDType dtype,
                              int64_t num_v_heads, int64_t head_dim_k, int64_t head_dim_v,
                              int layer) {
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
    const size_t head = i / static_cast<size_t>(head_dim_k * head_dim_v);
    const size_t k = i / static_cast<size_t>(head_dim_v) % static_cast<size_t>(head_dim_k);
    const size_t v = i % static_cast<size_t>(head_dim_v);
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", layer, ": state element ", i, " (head ", head, ", k ", k, ", v ", v, ") is ",
        x, "; a state must be finite with |x| <= ", kMaxStateMagnitude));
  }
  return absl::OkStatus();
}

}  // namespace gdn
