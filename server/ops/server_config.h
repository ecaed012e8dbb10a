// Everything gdn-server is configured with, as plain values (no flags here):
// main.cc fills it from the command line (server_flags.h), tests fill it
// directly. Read-only after start; safe to share between threads.
#ifndef GDN_SERVER_OPS_SERVER_CONFIG_H_
#define GDN_SERVER_OPS_SERVER_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernels/backend.h"
#include "kernels/gdn_types.h"

namespace gdn {

// PEM files of a TLS endpoint.
struct TlsFiles {
  std::string cert_file;       // the leaf first, then its chain
  std::string key_file;
  std::string client_ca_file;  // CA bundle for client certificates; empty: none asked for
  bool enabled() const { return !cert_file.empty(); }
};

struct ServerConfig {
  // gRPC: HOST:PORT (port 0 = pick one) or unix:/path (a Unix socket, for
  // clients on the same host).
  std::string listen = "127.0.0.1:50051";
  std::string metrics_listen = "127.0.0.1:9464";   // Prometheus, port 0 = pick
  BackendConfig backend;

  int num_layers = 36;
  GdnOptions options;  // shape, activation / state dtype, gating, l2 norm, scale

  // State cache budgets; 0 = the backend's default (DefaultBudgets).
  size_t device_state_budget_bytes = 0;
  size_t host_state_budget_bytes = 0;
  bool evict_lru_when_full = false;
  absl::Duration idle_timeout = absl::Seconds(600);

  // Batching (server/engine/engine.h): tokens per kernel call (long
  // prefills are chunked), and how long a batch that is not full may wait
  // for more calls while every lane of its kind is busy (0: launch as soon
  // as a lane is free; a lone call never waits).
  int64_t max_batch_tokens = 8192;
  absl::Duration max_queue_delay = absl::ZeroDuration();
  // How long the engine polls a busy lane for its end before it sleeps
  // until the stream's completion callback wakes it (a callback and a
  // wake-up cost tens of microseconds: a decode batch of 256 sessions, 0.3
  // ms of kernel, came back ~0.1 ms late). Polling takes a core while a
  // batch runs (--engine_spin_us: 1000 with 8 or more hardware threads,
  // else 50, server_flags.cc).
  absl::Duration lane_spin = absl::Microseconds(50);
  // How long the engine thread, with nothing left to do, polls for the next
  // call before it sleeps (0: it sleeps at once, and a call arriving at an
  // idle engine runs on its request thread). A polling engine thread takes
  // the next call on a warm core (--engine_poll_us: 1000 with 8 or more
  // hardware threads, else 0, server_flags.cc).
  absl::Duration idle_poll = absl::ZeroDuration();
  // Pipeline lanes (backend streams, one batch in flight each): decode
  // batches and prefill chunks on lanes of their own.
  int decode_lanes = 2;
  int prefill_lanes = 2;
  // Threads that finish calls (encode and send responses).
  int completion_threads = 2;
  // Host I/O memory for inputs and outputs of calls in flight (pinned on
  // cuda): more at once fails new calls with RESOURCE_EXHAUSTED.
  size_t io_buffer_bytes = size_t{4} << 30;
  // Threads that help request threads copy and check large requests' tensor
  // bytes into the I/O memory (0: none). Default: a quarter of the cores, at
  // most 4 (server_flags.cc). Requests with fewer tensor bytes than
  // pack_share_bytes are packed by their request thread alone (a helper's
  // wake-up costs more than it saves on small ones).
  int pack_threads = 0;
  size_t pack_share_bytes = size_t{1} << 20;
  // Requests with at least this many tensor bytes (and fewer than
  // pack_share_bytes) are packed with the help of the engine thread when it
  // is idle and polling (--engine_poll_us): no thread is woken for them.
  // 0: never.
  size_t pack_poll_share_bytes = size_t{256} << 10;
  // Decode kernels write o straight into the pinned memory the responses
  // are sent from, with no copy back (server/engine/engine_batches.cc).
  bool decode_o_direct = true;

  // gRPC transport (proto/grpc_transport.h): the message limit, the HTTP/2
  // stream window offered up front and the largest DATA frame accepted
  // (0: gRPC's own defaults, 64 KiB windows and 16 KiB frames).
  int64_t max_message_bytes = 64 << 20;
  int32_t grpc_window_bytes = 64 << 20;
  int32_t grpc_max_frame_bytes = 1 << 20;

  // Same-host Forward channels (server/channel/): how many may be open at
  // once (a thread each), and how long a channel's thread keeps polling
  // after a call before it sleeps (a runner's next layer call usually
  // comes sooner; 0: sleep at once, every call then pays a futex wake-up).
  // Polling takes a core: on a machine with few cores it delays the
  // engine's own threads more than a wake-up costs (--channel_spin_us
  // defaults to 0 below 8 hardware threads, server_flags.cc).
  int max_channels = 16;
  absl::Duration channel_spin = absl::ZeroDuration();

  // DIAGNOSTIC ONLY (gdn-bench's transport ceiling): Forward calls are
  // validated, admitted in position order, batched and answered, but no
  // kernel runs and no state page is written; o comes back as zeros of the
  // right shape and positions advance as if the call had been applied (so a
  // client's position sequence stays valid). State contents are meaningless.
  // Loud in the start-up log and in GetServerInfo's device string.
  bool diagnostic_no_compute = false;
  // How long a drain (SIGTERM) waits for in-flight calls before cancelling.
  absl::Duration drain_timeout = absl::Seconds(10);
  // Session hand-off directory (server/sessions/session_snapshot_dir.h); empty = off.
  // Set: a drain writes every session to DIR/<escaped id>.gdnsnap before the
  // listener stops, and a call naming a session this server does not hold
  // restores it from there first. Shared by the servers of one deployment.
  std::string snapshot_dir;

  // Security (README "Security"; server/auth/). TLS on the gRPC port
  // (server/auth/tls_credentials.h): empty cert_file = plaintext;
  // client_ca_file = mutual TLS. (The metrics port stays plain HTTP: README
  // "Security" says why.)
  TlsFiles grpc_tls;
  // Bearer tokens -> tenants (server/auth/tokens_file.h), re-read on SIGHUP;
  // empty = open (no authentication, one owner for everything).
  std::string tokens_file;
  // Quotas of tenants whose tokens-file lines give none (0 = unlimited).
  int64_t tenant_max_sessions = 0;
  int64_t tenant_max_state_pages = 0;
  // Without tokens_file the gRPC port must be loopback or a Unix socket
  // unless this is set (server/auth/listen_policy.h).
  bool allow_insecure_remote = false;
};

// InvalidArgument naming the first bad field (options via ValidateOptions).
absl::Status ValidateServerConfig(const ServerConfig& config);

// --device (BackendConfig::cuda_device): InvalidArgument when negative, or
// not 0 with --backend=cpu. Whether the device exists is known only once
// the cuda backend starts (kernels/device_topology.h, ValidateDeviceIndex:
// an out-of-range index stops gdn-server at start-up, exit status 1).
absl::Status ValidateDeviceFlag(const BackendConfig& backend);

// Default budgets when the flags leave them at 0: cpu 2 GiB device tier;
// cuda 60% of the device's free memory; host tier 4 GiB.
size_t DefaultDeviceBudget(absl::string_view backend_name,
                           const DeviceMemoryInfo& memory);
size_t DefaultHostBudget();

// Multi-line "key = value" listing, logged at start.
std::string DescribeServerConfig(const ServerConfig& config);

}  // namespace gdn

#endif  // GDN_SERVER_OPS_SERVER_CONFIG_H_
