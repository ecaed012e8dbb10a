#include "kernels/gdn_types.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace gdn {

size_t DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

size_t StateDTypeSize(StateDType dtype) {
  switch (dtype) {
    case StateDType::kF32: return 4;
    case StateDType::kBF16: return 2;
    case StateDType::kInt8:
    case StateDType::kFP8: return 1;
  }
  return 4;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "fp32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
  }
  return "unknown";
}

absl::string_view StateDTypeName(StateDType dtype) {
  switch (dtype) {
    case StateDType::kF32: return "fp32";
    case StateDType::kBF16: return "bf16";
    case StateDType::kInt8: return "int8";
    case StateDType::kFP8: return "fp8";
  }
  return "unknown";
}

absl::string_view StateRoundingName(StateRounding r) {
  switch (r) {
    case StateRounding::kNearest: return "nearest";
    case StateRounding::kStochastic: return "stochastic";
  }
  return "unknown";
}

absl::string_view GatingModeName(GatingMode mode) {
  switch (mode) {
    case GatingMode::kDirect: return "direct";
    case GatingMode::kFused: return "fused";
  }
  return "unknown";
}

bool ParseDType(absl::string_view name, DType* out) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) {
    if (name == DTypeName(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

bool ParseStateDType(absl::string_view name, StateDType* out) {
  for (StateDType d : {StateDType::kF32, StateDType::kBF16, StateDType::kInt8,
                       StateDType::kFP8}) {
    if (name == StateDTypeName(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

bool ParseStateRounding(absl::string_view name, StateRounding* out) {
  for (StateRounding r : {StateRounding::kNearest, StateRounding::kStochastic}) {
    if (name == StateRoundingName(r)) {
      *out = r;
      return true;
    }
  }
  return false;
}

bool ParseGatingMode(absl::string_view name, GatingMode* out) {
  for (GatingMode m : {GatingMode::kDirect, GatingMode::kFused}) {
    if (name == GatingModeName(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

float GdnOptions::effective_scale() const {
  return scale != 0.0f ? scale
                       : 1.0f / std::sqrt(static_cast<float>(shape.head_dim_k));
}

absl::Status ValidateOptions(const GdnOptions& options) {
  const LayerShape& s = options.shape;
  if (s.num_qk_heads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_qk_heads must be >= 1, got ", s.num_qk_heads));
  }
  if (s.num_v_heads < 1 || s.num_v_heads % s.num_qk_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_v_heads must be a positive multiple of num_qk_heads (",
        s.num_qk_heads, "), got ", s.num_v_heads));
  }
  if (s.head_dim_k != 64 && s.head_dim_k != 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_dim_k must be 64 or 128, got ", s.head_dim_k));
  }
  if (s.head_dim_v != 64 && s.head_dim_v != 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_dim_v must be 64 or 128, got ", s.head_dim_v));
  }
  const int state = static_cast<int>(options.state_dtype);
  if (state < 0 || state > static_cast<int>(StateDType::kFP8)) {
    return absl::InvalidArgumentError(absl::StrCat("state_dtype code ", state, " is unknown"));
  }
  const int rounding = static_cast<int>(options.state_rounding);
  if (rounding < 0 || rounding > static_cast<int>(StateRounding::kStochastic)) {
    return absl::InvalidArgumentError(
        absl::StrCat("state_rounding code ", rounding, " is unknown"));
  }
  if (!std::isfinite(options.scale) || options.scale < 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scale must be finite and >= 0 (0 = K^-1/2), got ", options.scale));
  }
  return absl::OkStatus();
}

StatePageLayout StatePageLayout::For(const LayerShape& shape,
                                     StateDType dtype) {
  StatePageLayout layout;
  layout.state_bytes = static_cast<size_t>(shape.num_v_heads) *
                       shape.head_dim_k * shape.head_dim_v *
                       StateDTypeSize(dtype);
  layout.scales_bytes =
      IsQuantizedState(dtype)
          ? static_cast<size_t>(shape.num_v_heads) * (shape.head_dim_v / kStateScaleCols) *
                sizeof(float)
          : 0;
  const size_t raw = layout.state_bytes + layout.scales_bytes;
  layout.page_bytes = (raw + 255) / 256 * 256;
  return layout;
}

std::string DescribeOptions(const GdnOptions& o) {
  return absl::StrCat("Hqk=", o.shape.num_qk_heads, " Hv=", o.shape.num_v_heads,
                      " K=", o.shape.head_dim_k, " V=", o.shape.head_dim_v,
                      " input=", DTypeName(o.input_dtype),
                      " state=", StateDTypeName(o.state_dtype),
                      IsQuantizedState(o.state_dtype)
                          ? absl::StrCat("/", StateRoundingName(o.state_rounding))
                          : "",
                      " gating=", GatingModeName(o.gating),
                      " l2norm=", o.l2_norm_qk ? "on" : "off",
                      " scale=", o.effective_scale());
}

}  // namespace gdn
