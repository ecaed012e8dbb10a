// gdn-echo: an echo server of the real gdn.v1 messages, the ceiling every
// request-path figure is compared with (bench/echo/README.md).
//
//   gdn-echo --mode=proto|raw --listen=127.0.0.1:0 [--layers=36 --qk_heads=16 ...]
//
// Prints exactly one line to stdout, `gdn-echo listening grpc=ADDR`, with the
// port actually bound, and serves until SIGTERM / SIGINT. Exit codes: 0 after
// a signal, 1 cannot listen, 2 bad flags.
#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench/echo/echo_server.h"
#include "proto/grpc_transport.h"

ABSL_FLAG(std::string, mode, "proto",
          "proto: Forward through the generated protobuf handler; raw: scanned and encoded in "
          "place (proto/forward_wire.h), o sent from a static buffer");
ABSL_FLAG(std::string, listen, "127.0.0.1:50071", "HOST:PORT (port 0 picks one) or unix:/path");
ABSL_FLAG(int, layers, 36, "layers GetServerInfo reports");
ABSL_FLAG(int, qk_heads, 16, "Hqk");
ABSL_FLAG(int, v_heads, 32, "Hv (o is [T, Hv, V])");
ABSL_FLAG(int, head_dim_k, 128, "K");
ABSL_FLAG(int, head_dim_v, 128, "V");
ABSL_FLAG(std::string, activation_dtype, "bf16", "o's dtype: bf16, fp16, fp32");
ABSL_FLAG(int64_t, max_batch_tokens, 8192, "reported in Limits");
ABSL_FLAG(double, idle_timeout_s, 600, "reported in Limits");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20, "largest message sent or received");
ABSL_FLAG(bool, default_transport, false,
          "gRPC's default HTTP/2 window, frame and read sizes (the 'before' figures); "
          "overrides the three size flags");
ABSL_FLAG(int32_t, stream_window_bytes, 64 << 20,
          "per-stream flow-control window offered (grpc.http2.lookahead_bytes); 0: gRPC's default");
ABSL_FLAG(int32_t, max_frame_bytes, 1 << 20, "largest HTTP/2 frame accepted; 0: gRPC's default");
ABSL_FLAG(int32_t, max_read_chunk_bytes, 4 << 20, "bytes per socket read at most; 0: gRPC's default");

namespace {

absl::StatusOr<gdn::echo::EchoOptions> OptionsFromFlags() {
  gdn::echo::EchoOptions o;
  absl::StatusOr<gdn::echo::EchoMode> mode = gdn::echo::ParseEchoMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok()) return mode.status();
  o.mode = *mode;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.layers = absl::GetFlag(FLAGS_layers);
  o.qk_heads = absl::GetFlag(FLAGS_qk_heads);
  o.v_heads = absl::GetFlag(FLAGS_v_heads);
  o.head_dim_k = absl::GetFlag(FLAGS_head_dim_k);
  o.head_dim_v = absl::GetFlag(FLAGS_head_dim_v);
  const std::string dtype = absl::GetFlag(FLAGS_activation_dtype);
  if (!gdn::ParseDType(dtype, &o.activation_dtype)) {
    return absl::InvalidArgumentError("--activation_dtype must be bf16, fp16 or fp32, got '" +
                                      dtype + "'");
  }
  o.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  o.idle_timeout_s = absl::GetFlag(FLAGS_idle_timeout_s);
  o.transport.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.transport.stream_window_bytes = absl::GetFlag(FLAGS_stream_window_bytes);
  o.transport.max_frame_bytes = absl::GetFlag(FLAGS_max_frame_bytes);
  o.transport.max_read_chunk_bytes = absl::GetFlag(FLAGS_max_read_chunk_bytes);
  o.default_transport = absl::GetFlag(FLAGS_default_transport);
  if (absl::Status s = gdn::echo::ValidateEchoOptions(o); !s.ok()) return s;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "an echo server of gdn.v1 (no engine): gdn-echo --mode=proto|raw --listen=HOST:PORT");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  gdn::wire::KeepFreedMemoryForLargeMessages();  // as gdn-server does
  gdn::wire::SkipMutexDeadlockDetection();
  if (args.size() > 1) {
    std::cerr << "gdn-echo: unexpected argument '" << args[1] << "' (flags only)\n";
    return 2;
  }
  absl::StatusOr<gdn::echo::EchoOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    std::cerr << "gdn-echo: " << options.status().message() << "\n";
    return 2;
  }
  // Threads started from here on inherit the blocked signals; main takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<gdn::echo::EchoServer>> server =
      gdn::echo::EchoServer::Start(*options);
  if (!server.ok()) {
    std::cerr << "gdn-echo: " << server.status().message() << "\n";
    return 1;
  }
  std::cerr << "gdn-echo: mode " << gdn::echo::EchoModeName(options->mode) << ", "
            << (options->default_transport ? "gRPC default transport" : "tuned transport")
            << ", Hqk " << options->qk_heads << " Hv " << options->v_heads << " K "
            << options->head_dim_k << " V " << options->head_dim_v << " "
            << gdn::DTypeName(options->activation_dtype) << "\n";
  std::cout << "gdn-echo listening grpc=" << (*server)->address() << std::endl;
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  (*server)->Shutdown();
  return 0;
}
