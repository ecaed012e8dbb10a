#include "server/ops/server_config.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/ops/byte_size.h"

namespace gdn {

absl::Status ValidateServerConfig(const ServerConfig& c) {
  if (absl::Status s = ValidateOptions(c.options); !s.ok()) return s;
  if (absl::Status s = ValidateDeviceFlag(c.backend); !s.ok()) return s;
  if (c.num_layers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers must be >= 1, got ", c.num_layers));
  }
  if (c.max_batch_tokens < kMaxDecodeTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_tokens must be >= ", kMaxDecodeTokens,
                     ", got ", c.max_batch_tokens));
  }
  if (c.max_queue_delay < absl::ZeroDuration() || c.lane_spin < absl::ZeroDuration() ||
      c.idle_poll < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "max_queue_delay_us, engine_spin_us and engine_poll_us must be >= 0");
  }
  if (c.grpc_window_bytes < 0 || c.grpc_max_frame_bytes < 0 ||
      c.grpc_max_frame_bytes > (16 << 20) - 1) {
    return absl::InvalidArgumentError(
        "grpc_window_bytes must be >= 0 and grpc_max_frame_bytes in [0, 16 MiB - 1]");
  }
  if (c.decode_lanes < 1 || c.prefill_lanes < 1 || c.completion_threads < 1) {
    return absl::InvalidArgumentError(
        "decode_lanes, prefill_lanes and completion_threads must be >= 1");
  }
  if (c.pack_threads < 0 || c.pack_threads > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("pack_threads must be in [0, 64], got ", c.pack_threads));
  }
  if (c.max_channels < 0 || c.channel_spin < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_channels and channel_spin_us must be >= 0");
  }
  if (c.idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("idle_timeout_s must be > 0");
  }
  // Export pieces are <= max_message_bytes / 2; a piece needs room for data.
  if (c.max_message_bytes < (1 << 16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_message_bytes must be >= 65536, got ", c.max_message_bytes));
  }
  if (c.io_buffer_bytes < 2 * static_cast<size_t>(c.max_message_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "io_buffer_bytes must hold at least two messages (2 x max_message_bytes = ",
        2 * c.max_message_bytes, "), got ", c.io_buffer_bytes));
  }
  if (c.grpc_tls.cert_file.empty() != c.grpc_tls.key_file.empty() ||
      (!c.grpc_tls.client_ca_file.empty() && c.grpc_tls.cert_file.empty())) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file go together (and --tls_client_ca_file needs both)");
  }
  if (c.tenant_max_sessions < 0 || c.tenant_max_state_pages < 0) {
    return absl::InvalidArgumentError(
        "tenant_max_sessions and tenant_max_state_pages must be >= 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateDeviceFlag(const BackendConfig& backend) {
  if (backend.cuda_device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device must be >= 0, got ", backend.cuda_device));
  }
  if (backend.cuda_device != 0 && backend.kind == BackendKind::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device=", backend.cuda_device, " picks a CUDA device, but --backend=cpu has none "
        "(leave --device at 0, or use --backend=cuda)"));
  }
  return absl::OkStatus();
}

size_t DefaultDeviceBudget(absl::string_view backend_name,
                           const DeviceMemoryInfo& memory) {
  if (backend_name == "cuda" && memory.total_bytes > memory.used_bytes) {
    return (memory.total_bytes - memory.used_bytes) / 10 * 6;
  }
  return size_t{2} << 30;
}

size_t DefaultHostBudget() { return size_t{4} << 30; }

std::string DescribeServerConfig(const ServerConfig& c) {
  auto budget = [](size_t bytes) {
    return bytes == 0 ? std::string("default") : FormatByteSize(bytes);
  };
  std::string out;
  absl::StrAppend(&out, "  listen = ", c.listen, "\n");
  absl::StrAppend(&out, "  metrics_listen = ", c.metrics_listen, "\n");
  absl::StrAppend(&out, "  backend = ",
                  c.backend.kind == BackendKind::kCpu    ? "cpu"
                  : c.backend.kind == BackendKind::kCuda ? "cuda"
                                                         : "auto",
                  "\n");
  absl::StrAppend(&out, "  cpu_threads = ", c.backend.cpu_threads, "\n");
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  absl::StrAppend(&out, "  device = ", c.backend.cuda_device, " (cuda; CUDA_VISIBLE_DEVICES=",
                  visible == nullptr ? "(unset)" : visible, ")\n");
  absl::StrAppend(&out, "  layers = ", c.num_layers, "\n");
  absl::StrAppend(&out, "  layer = ", DescribeOptions(c.options), "\n");
  absl::StrAppend(&out, "  device_state_budget = ",
                  budget(c.device_state_budget_bytes), "\n");
  absl::StrAppend(&out, "  host_state_budget = ",
                  budget(c.host_state_budget_bytes), "\n");
  absl::StrAppend(&out, "  evict_lru_when_full = ",
                  c.evict_lru_when_full ? "true" : "false", "\n");
  absl::StrAppend(&out, "  idle_timeout = ", absl::FormatDuration(c.idle_timeout),
                  "\n");
  absl::StrAppend(&out, "  max_batch_tokens = ", c.max_batch_tokens, "\n");
  absl::StrAppend(&out, "  max_queue_delay = ",
                  absl::FormatDuration(c.max_queue_delay), ", lanes polled ",
                  absl::FormatDuration(c.lane_spin), " before sleeping, calls polled ",
                  absl::FormatDuration(c.idle_poll), " when idle\n");
  absl::StrAppend(&out, "  lanes = ", c.decode_lanes, " decode, ", c.prefill_lanes,
                  " prefill\n");
  absl::StrAppend(&out, "  completion_threads = ", c.completion_threads, "\n");
  absl::StrAppend(&out, "  io_buffer_bytes = ", FormatByteSize(c.io_buffer_bytes), "\n");
  absl::StrAppend(&out, "  pack_threads = ", c.pack_threads, ", for requests from ",
                  FormatByteSize(c.pack_share_bytes), " (with the idle engine thread from ",
                  FormatByteSize(c.pack_poll_share_bytes), ")\n");
  absl::StrAppend(&out, "  decode_o_direct = ", c.decode_o_direct ? "true" : "false", "\n");
  absl::StrAppend(&out, "  max_message_bytes = ", c.max_message_bytes, "\n");
  absl::StrAppend(&out, "  grpc window / max frame = ", c.grpc_window_bytes, " / ",
                  c.grpc_max_frame_bytes, " bytes (0 = gRPC default)\n");
  absl::StrAppend(&out, "  channels = ", c.max_channels, " at most, spinning ",
                  absl::FormatDuration(c.channel_spin), " after a call\n");
  absl::StrAppend(&out, "  drain_timeout = ",
                  absl::FormatDuration(c.drain_timeout), "\n");
  absl::StrAppend(&out, "  snapshot_dir = ",
                  c.snapshot_dir.empty() ? "(off)" : c.snapshot_dir, "\n");
  auto tls = [](const TlsFiles& t) {
    return t.cert_file.empty() ? std::string("off")
                               : absl::StrCat(t.cert_file, t.client_ca_file.empty()
                                                               ? ""
                                                               : " (mutual, client CA ",
                                              t.client_ca_file,
                                              t.client_ca_file.empty() ? "" : ")");
  };
  absl::StrAppend(&out, "  tls = ", tls(c.grpc_tls), "\n");
  absl::StrAppend(&out, "  tokens_file = ",
                  c.tokens_file.empty() ? "(off: no authentication)" : c.tokens_file,
                  c.allow_insecure_remote ? " (allow_insecure_remote)" : "", "\n");
  absl::StrAppend(&out, "  tenant quotas = ", c.tenant_max_sessions, " sessions, ",
                  c.tenant_max_state_pages, " state pages (0 = unlimited)\n");
  return out;
}

}  // namespace gdn
