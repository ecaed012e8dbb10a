// What gdn-echo serves: the layer shape and limits it reports (gdn-server's
// flag names and defaults), how it answers Forward, where it listens and the
// transport settings of proto/grpc_transport.h.
#ifndef GDN_BENCH_ECHO_ECHO_OPTIONS_H_
#define GDN_BENCH_ECHO_ECHO_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gdn/v1/gdn.pb.h"
#include "kernels/gdn_types.h"
#include "proto/grpc_transport.h"

namespace gdn::echo {

enum class EchoMode {
  // Forward through the generated protobuf handler: the request parsed into a
  // ForwardRequest, the response a ForwardResponse protobuf serializes.
  kProto,
  // Forward as raw bytes: the request scanned in place (forward_wire.h), the
  // response encoded with o as a slice of a static buffer (no copy).
  kRaw,
};

absl::StatusOr<EchoMode> ParseEchoMode(absl::string_view name);  // "proto", "raw"
const char* EchoModeName(EchoMode mode);

struct EchoOptions {
  EchoMode mode = EchoMode::kProto;
  // "HOST:PORT" (port 0 picks a free one) or "unix:/path".
  std::string listen = "127.0.0.1:0";
  // The layer configuration GetServerInfo reports and Forward's o follows:
  // o is [T, v_heads, head_dim_v] of activation_dtype.
  int layers = 36;
  int qk_heads = 16;
  int v_heads = 32;
  int head_dim_k = 128;
  int head_dim_v = 128;
  DType activation_dtype = DType::kBF16;
  // Limits it reports (it enforces only the message size, through gRPC).
  int64_t max_batch_tokens = 8192;
  double idle_timeout_s = 600;
  // transport.max_message_bytes is the message limit, sent and received.
  wire::TransportOptions transport;
  // True: gRPC's default window, frame and read sizes (the "before" figures);
  // only the message limit is set.
  bool default_transport = false;
};

// InvalidArgument naming the first bad field.
absl::Status ValidateEchoOptions(const EchoOptions& options);

// The LayerConfig of `options` (state fp32, direct gating, l2-normalised q/k,
// scale K^-1/2: gdn-server's defaults).
v1::LayerConfig EchoLayerConfig(const EchoOptions& options);

// GetServerInfo's answer: backend "echo", device "echo (no engine)", version
// "echo/proto" or "echo/raw".
v1::ServerInfoResponse EchoServerInfo(const EchoOptions& options);

}  // namespace gdn::echo

#endif  // GDN_BENCH_ECHO_ECHO_OPTIONS_H_
