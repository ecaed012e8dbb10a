#include "server/ops/server_flags.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "server/ops/byte_size.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC address HOST:PORT (port 0 picks a free port), or unix:/path "
          "for a Unix domain socket (same-host clients)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Prometheus /metrics address HOST:PORT (port 0 picks a free port)");
ABSL_FLAG(std::string, backend, "auto",
          "kernel backend: auto (cuda when built and a device exists), cpu, cuda");
ABSL_FLAG(int32_t, device, 0,
          "CUDA device this server runs on (one server per GPU), counted among "
          "the devices CUDA_VISIBLE_DEVICES leaves visible; out of range fails "
          "at start-up. The cpu backend takes only 0");
ABSL_FLAG(int32_t, layers, 36, "GDN layers per session");
ABSL_FLAG(int32_t, qk_heads, 16, "query/key heads Hqk");
ABSL_FLAG(int32_t, v_heads, 32, "value heads Hv (a multiple of qk_heads)");
ABSL_FLAG(int32_t, head_dim_k, 128, "key head dimension K (64 or 128)");
ABSL_FLAG(int32_t, head_dim_v, 128, "value head dimension V (64 or 128)");
ABSL_FLAG(std::string, activation_dtype, "bf16",
          "dtype of q, k, v and o on the wire: fp32, bf16, fp16");
ABSL_FLAG(std::string, state_dtype, "fp32",
          "state storage dtype: fp32, bf16, int8 or fp8 (e4m3; int8 / fp8 pages "
          "carry fp32 scales, ~3.9x the sessions of fp32)");
ABSL_FLAG(std::string, state_rounding, "nearest",
          "how int8 / fp8 states are rounded when stored: nearest (default: the "
          "smaller drift measured, README 'State dtypes') or stochastic");
ABSL_FLAG(std::string, gating, "direct",
          "gating inputs: direct (g, beta) or fused (a, b, A_log, dt_bias)");
ABSL_FLAG(bool, l2_norm_qk, true, "L2-normalise q and k inside the operator");
ABSL_FLAG(float, scale, 0.0f, "query scale (0 = K^-1/2)");
ABSL_FLAG(gdn::ByteSize, device_state_budget, gdn::ByteSize{},
          "bytes of device state pages, e.g. 2GiB or 512MiB (0 = default: "
          "cpu 2GiB, cuda 60% of free device memory)");
ABSL_FLAG(gdn::ByteSize, host_state_budget, gdn::ByteSize{},
          "bytes of the pinned host tier that takes spilled pages (0 = "
          "default 4GiB)");
ABSL_FLAG(bool, evict_lru_when_full, false,
          "when both tiers are full, drop least-recently-used idle sessions "
          "instead of failing with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, idle_timeout_s, 600,
          "close sessions idle for this many seconds");
ABSL_FLAG(int64_t, max_batch_tokens, 8192,
          "prefill tokens per kernel call (long prefills are chunked)");
ABSL_FLAG(int64_t, max_queue_delay_us, 0,
          "how long a batch that is not full may wait for more calls while "
          "every lane of its kind is busy (0: launch when a lane is free; a "
          "lone call never waits)");
ABSL_FLAG(int32_t, decode_lanes, 2,
          "decode batches in flight at once (one backend stream each)");
ABSL_FLAG(int32_t, prefill_lanes, 2,
          "prefill chunks in flight at once (one backend stream each)");
ABSL_FLAG(int32_t, completion_threads, 2,
          "threads that encode and send Forward responses");
ABSL_FLAG(int32_t, pack_threads, -1,
          "threads that help copy and check the tensors of large requests "
          "(-1: a quarter of the cores, at most 4; 0: none)");
ABSL_FLAG(gdn::ByteSize, pack_share_bytes, gdn::ByteSize{size_t{1} << 20},
          "requests with at least this many tensor bytes are copied and checked "
          "with the pack_threads' help (smaller ones by their request thread "
          "alone)");
ABSL_FLAG(gdn::ByteSize, pack_poll_share_bytes, gdn::ByteSize{size_t{256} << 10},
          "requests with at least this many tensor bytes (below pack_share_bytes) "
          "are copied and checked with the help of the engine thread while it is "
          "idle and polling (0: never)");
ABSL_FLAG(bool, decode_o_direct, true,
          "decode kernels write o straight into the pinned host memory responses "
          "are sent from (false: into device memory, then copied back)");
ABSL_FLAG(gdn::ByteSize, io_buffer_bytes, gdn::ByteSize{size_t{4} << 30},
          "host memory for the inputs and outputs of calls in flight (pinned "
          "on cuda); beyond it new calls fail with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20,
          "largest gRPC message received or sent");
ABSL_FLAG(gdn::ByteSize, grpc_window_bytes, gdn::ByteSize{64 << 20},
          "HTTP/2 stream window offered to clients up front, so a large "
          "request is sent without waiting for window updates (0: gRPC's "
          "default)");
ABSL_FLAG(gdn::ByteSize, grpc_max_frame_bytes, gdn::ByteSize{1 << 20},
          "largest HTTP/2 DATA frame accepted (0: gRPC's default 16KiB)");
ABSL_FLAG(int64_t, engine_spin_us, -1,
          "how long the engine polls a running batch for its end before it "
          "sleeps until the stream's callback (-1: 1000 with 8 or more "
          "hardware threads, else 50)");
ABSL_FLAG(int64_t, engine_poll_us, -1,
          "how long the engine thread, idle, polls for the next call before it "
          "sleeps (0: sleeps at once, and a lone call runs on its request "
          "thread; -1: 1000 with 8 or more hardware threads, else 0)");
ABSL_FLAG(int32_t, max_channels, 16,
          "same-host Forward channels open at once (OpenChannel; a thread "
          "each)");
ABSL_FLAG(int64_t, channel_spin_us, -1,
          "how long a channel's thread polls after a call before it sleeps "
          "(0: sleep at once; -1: 1000 with 8 or more hardware threads, else "
          "0, as polling on few cores starves the engine's threads)");
ABSL_FLAG(int32_t, cpu_threads, 0, "cpu backend threads (0 = one per core)");
ABSL_FLAG(int64_t, drain_timeout_s, 10,
          "on SIGTERM / SIGINT, how long in-flight calls may take to finish");
ABSL_FLAG(std::string, snapshot_dir, "",
          "session hand-off directory shared by the servers of a deployment "
          "(empty = off): on SIGTERM every session is written there as "
          "<escaped id>.gdnsnap before the listener stops; a call naming a "
          "session this server does not hold restores it from there");

ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate (chain) for TLS on the gRPC port (empty: plaintext)");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA bundle: gRPC clients must present a certificate it signed "
          "(mutual TLS; empty: no client certificates)");
ABSL_FLAG(std::string, tokens_file, "",
          "bearer tokens -> tenants, one 'TENANT TOKEN [max_sessions=N] "
          "[max_state_pages=N]' per line (README: Security); re-read on SIGHUP. "
          "Empty: no authentication");
ABSL_FLAG(int64_t, tenant_max_sessions, 0,
          "sessions per tenant when its tokens-file line gives no max_sessions (0: unlimited)");
ABSL_FLAG(int64_t, tenant_max_state_pages, 0,
          "state pages per tenant when its tokens-file line gives no max_state_pages "
          "(0: unlimited)");
ABSL_FLAG(bool, allow_insecure_remote, false,
          "serve a non-loopback --listen address without --tokens_file (only when "
          "something in front authenticates clients)");

ABSL_FLAG(bool, diagnostic_no_compute, false,
          "DIAGNOSTIC ONLY: answer Forward calls without running kernels or "
          "writing states (o = zeros, positions advance); measures the "
          "transport ceiling with gdn-bench. Never for real traffic");

namespace gdn {

absl::StatusOr<ServerConfig> ServerConfigFromFlags() {
  ServerConfig c;
  c.listen = absl::GetFlag(FLAGS_listen);
  c.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  if (!ParseBackendKind(absl::GetFlag(FLAGS_backend), &c.backend.kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backend must be auto, cpu or cuda, got '",
        absl::GetFlag(FLAGS_backend), "'"));
  }
  c.backend.cpu_threads = absl::GetFlag(FLAGS_cpu_threads);
  c.backend.cuda_device = absl::GetFlag(FLAGS_device);
  c.num_layers = absl::GetFlag(FLAGS_layers);
  c.options.shape.num_qk_heads = absl::GetFlag(FLAGS_qk_heads);
  c.options.shape.num_v_heads = absl::GetFlag(FLAGS_v_heads);
  c.options.shape.head_dim_k = absl::GetFlag(FLAGS_head_dim_k);
  c.options.shape.head_dim_v = absl::GetFlag(FLAGS_head_dim_v);
  if (!ParseDType(absl::GetFlag(FLAGS_activation_dtype),
                  &c.options.input_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--activation_dtype must be fp32, bf16 or fp16, got '",
        absl::GetFlag(FLAGS_activation_dtype), "'"));
  }
  if (!ParseStateDType(absl::GetFlag(FLAGS_state_dtype),
                       &c.options.state_dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--state_dtype must be fp32, bf16, int8 or fp8, got '",
                     absl::GetFlag(FLAGS_state_dtype), "'"));
  }
  if (!ParseStateRounding(absl::GetFlag(FLAGS_state_rounding),
                          &c.options.state_rounding)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--state_rounding must be nearest or stochastic, got '",
                     absl::GetFlag(FLAGS_state_rounding), "'"));
  }
  if (!ParseGatingMode(absl::GetFlag(FLAGS_gating), &c.options.gating)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gating must be direct or fused, got '",
                     absl::GetFlag(FLAGS_gating), "'"));
  }
  c.options.l2_norm_qk = absl::GetFlag(FLAGS_l2_norm_qk);
  c.options.scale = absl::GetFlag(FLAGS_scale);
  c.device_state_budget_bytes = absl::GetFlag(FLAGS_device_state_budget).bytes;
  c.host_state_budget_bytes = absl::GetFlag(FLAGS_host_state_budget).bytes;
  c.evict_lru_when_full = absl::GetFlag(FLAGS_evict_lru_when_full);
  c.idle_timeout = absl::Seconds(absl::GetFlag(FLAGS_idle_timeout_s));
  c.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  c.max_queue_delay = absl::Microseconds(absl::GetFlag(FLAGS_max_queue_delay_us));
  const int64_t engine_spin_us = absl::GetFlag(FLAGS_engine_spin_us);
  c.lane_spin = absl::Microseconds(
      engine_spin_us >= 0 ? engine_spin_us
                          : (std::thread::hardware_concurrency() >= 8 ? 1000 : 50));
  const int64_t engine_poll_us = absl::GetFlag(FLAGS_engine_poll_us);
  c.idle_poll = absl::Microseconds(
      engine_poll_us >= 0 ? engine_poll_us
                          : (std::thread::hardware_concurrency() >= 8 ? 1000 : 0));
  c.grpc_window_bytes = static_cast<int32_t>(
      std::min<size_t>(absl::GetFlag(FLAGS_grpc_window_bytes).bytes, INT32_MAX));
  c.grpc_max_frame_bytes = static_cast<int32_t>(
      std::min<size_t>(absl::GetFlag(FLAGS_grpc_max_frame_bytes).bytes, INT32_MAX));
  c.decode_lanes = absl::GetFlag(FLAGS_decode_lanes);
  c.prefill_lanes = absl::GetFlag(FLAGS_prefill_lanes);
  c.completion_threads = absl::GetFlag(FLAGS_completion_threads);
  c.io_buffer_bytes = absl::GetFlag(FLAGS_io_buffer_bytes).bytes;
  c.pack_threads = absl::GetFlag(FLAGS_pack_threads);
  if (c.pack_threads < 0) {
    c.pack_threads = std::min<int>(4, static_cast<int>(std::thread::hardware_concurrency() / 4));
  }
  c.pack_share_bytes = absl::GetFlag(FLAGS_pack_share_bytes).bytes;
  c.pack_poll_share_bytes = absl::GetFlag(FLAGS_pack_poll_share_bytes).bytes;
  c.decode_o_direct = absl::GetFlag(FLAGS_decode_o_direct);
  c.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  c.drain_timeout = absl::Seconds(absl::GetFlag(FLAGS_drain_timeout_s));
  c.max_channels = absl::GetFlag(FLAGS_max_channels);
  const int64_t spin_us = absl::GetFlag(FLAGS_channel_spin_us);
  c.channel_spin = absl::Microseconds(
      spin_us >= 0 ? spin_us : (std::thread::hardware_concurrency() >= 8 ? 1000 : 0));
  c.diagnostic_no_compute = absl::GetFlag(FLAGS_diagnostic_no_compute);
  c.snapshot_dir = absl::GetFlag(FLAGS_snapshot_dir);
  c.grpc_tls = {absl::GetFlag(FLAGS_tls_cert_file), absl::GetFlag(FLAGS_tls_key_file),
                absl::GetFlag(FLAGS_tls_client_ca_file)};
  c.tokens_file = absl::GetFlag(FLAGS_tokens_file);
  c.tenant_max_sessions = absl::GetFlag(FLAGS_tenant_max_sessions);
  c.tenant_max_state_pages = absl::GetFlag(FLAGS_tenant_max_state_pages);
  c.allow_insecure_remote = absl::GetFlag(FLAGS_allow_insecure_remote);
  if (absl::Status s = ValidateServerConfig(c); !s.ok()) return s;
  return c;
}

}  // namespace gdn
