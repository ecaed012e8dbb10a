#include "bench/echo/echo_options.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "proto/tensor_codec.h"

namespace gdn::echo {

absl::StatusOr<EchoMode> ParseEchoMode(absl::string_view name) {
  if (name == "proto") return EchoMode::kProto;
  if (name == "raw") return EchoMode::kRaw;
  return absl::InvalidArgumentError(
      absl::StrCat("--mode must be proto or raw, got '", name, "'"));
}

const char* EchoModeName(EchoMode mode) { return mode == EchoMode::kProto ? "proto" : "raw"; }

absl::Status ValidateEchoOptions(const EchoOptions& o) {
  auto positive = [](const char* name, int64_t v) -> absl::Status {
    if (v > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be > 0, got ", v));
  };
  for (auto [name, value] : {std::pair<const char*, int64_t>{"layers", o.layers},
                             {"qk_heads", o.qk_heads},
                             {"v_heads", o.v_heads},
                             {"head_dim_k", o.head_dim_k},
                             {"head_dim_v", o.head_dim_v},
                             {"max_batch_tokens", o.max_batch_tokens},
                             {"max_message_bytes", o.transport.max_message_bytes}}) {
    if (absl::Status s = positive(name, value); !s.ok()) return s;
  }
  if (o.listen.empty()) return absl::InvalidArgumentError("--listen is empty");
  if (o.transport.stream_window_bytes < 0 || o.transport.max_frame_bytes < 0 ||
      o.transport.max_read_chunk_bytes < 0) {
    return absl::InvalidArgumentError("transport sizes must be >= 0 (0: gRPC's default)");
  }
  return absl::OkStatus();
}

v1::LayerConfig EchoLayerConfig(const EchoOptions& o) {
  v1::LayerConfig c;
  c.set_num_layers(o.layers);
  c.set_num_qk_heads(o.qk_heads);
  c.set_num_v_heads(o.v_heads);
  c.set_head_dim_k(o.head_dim_k);
  c.set_head_dim_v(o.head_dim_v);
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  wire::ToProtoDType(o.activation_dtype, &dtype);
  c.set_activation_dtype(dtype);
  c.set_state_dtype("fp32");
  c.set_gating_mode("direct");
  c.set_l2_norm_qk(true);
  c.set_scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(o.head_dim_k))));
  return c;
}

v1::ServerInfoResponse EchoServerInfo(const EchoOptions& o) {
  v1::ServerInfoResponse info;
  *info.mutable_config() = EchoLayerConfig(o);
  v1::Limits* limits = info.mutable_limits();
  limits->set_max_message_bytes(o.transport.max_message_bytes);
  limits->set_max_decode_tokens(kMaxDecodeTokens);
  limits->set_max_batch_tokens(o.max_batch_tokens);
  // A state page's size; the echo keeps no state, so it has no pages.
  limits->set_page_bytes(static_cast<int64_t>(o.v_heads) * o.head_dim_k * o.head_dim_v * 4);
  limits->set_idle_timeout_seconds(o.idle_timeout_s);
  info.set_backend("echo");
  info.set_device("echo (no engine)");
  info.set_version(absl::StrCat("echo/", EchoModeName(o.mode)));  // which Forward path answers
  return info;
}

}  // namespace gdn::echo
