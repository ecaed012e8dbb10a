// gdn-min-client: the cheapest client of a gdn.v1 server's Forward, the floor
// gdn-bench is judged against (bench/echo/README.md).
//
//   gdn-min-client --server=HOST:PORT|unix:/path --sessions=N --tokens=T
//       [--calls=2000 --warmup_calls=200 --json_out=F]
//
// Builds ONE request of N sessions x T tokens at the shape the server reports
// (GetServerInfo), once, as a ByteBuffer whose payloads reference a static
// buffer (min_client_request.h), then calls Forward with it in a closed loop
// on one channel through grpc::GenericStub (client/raw_unary_call.h). Each
// timed call is: a context with a deadline, the RPC, and the response's scan
// (wire::ScanForwardResponse, o's size checked), nothing else. Positions
// never advance, so the target is an echo (gdn-echo), which ignores them.
// Prints P50 / P90 / P99 / mean in microseconds.
//
// Exit codes: 0 done, 1 a call failed or an output not written, 2 bad flags.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "bench/echo/latency_summary.h"
#include "bench/echo/min_client_request.h"
#include "client/raw_unary_call.h"
#include "gdn/v1/gdn.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/forward_wire.h"
#include "proto/grpc_transport.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50071", "HOST:PORT or unix:/path of the echo");
ABSL_FLAG(int, sessions, 1, "sessions in the one Forward call");
ABSL_FLAG(int, tokens, 1, "tokens per session");
ABSL_FLAG(int, layer, 0, "the call's layer");
ABSL_FLAG(int, calls, 2000, "measured calls");
ABSL_FLAG(int, warmup_calls, 200, "calls before the measured ones");
ABSL_FLAG(double, max_seconds, 0, "> 0: stop measuring after this long even if --calls is not reached");
ABSL_FLAG(double, deadline_s, 30, "per-call deadline");
ABSL_FLAG(std::string, call_api, "cq",
          "cq: the calling thread drives its own completion queue (no thread hop); callback: "
          "gRPC's callback API and a condition variable");
ABSL_FLAG(int64_t, max_message_bytes, 64 << 20, "largest message");
ABSL_FLAG(bool, default_transport, false, "gRPC's default window, frame and read sizes");
ABSL_FLAG(int32_t, stream_window_bytes, 64 << 20, "per-stream window offered; 0: gRPC's default");
ABSL_FLAG(int32_t, max_frame_bytes, 1 << 20, "largest HTTP/2 frame accepted; 0: gRPC's default");
ABSL_FLAG(int32_t, max_read_chunk_bytes, 4 << 20, "bytes per socket read; 0: gRPC's default");
ABSL_FLAG(std::string, route_key, "",
          "non-empty: send it as the x-gdn-route header, as gdn-bench and GdnClient do (a proxy "
          "routes on it)");
ABSL_FLAG(std::string, json_out, "", "write the result as JSON here");

namespace {

using Clock = std::chrono::steady_clock;

// User + system CPU seconds of this process so far.
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int Fail(const std::string& why, int code = 1) {
  std::cerr << "gdn-min-client: " << why << "\n";
  return code;
}

gdn::wire::TransportOptions TransportFromFlags() {
  gdn::wire::TransportOptions t;
  t.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  if (absl::GetFlag(FLAGS_default_transport)) {
    t.stream_window_bytes = t.max_frame_bytes = t.max_read_chunk_bytes = 0;
  } else {
    t.stream_window_bytes = absl::GetFlag(FLAGS_stream_window_bytes);
    t.max_frame_bytes = absl::GetFlag(FLAGS_max_frame_bytes);
    t.max_read_chunk_bytes = absl::GetFlag(FLAGS_max_read_chunk_bytes);
  }
  return t;
}

// One timed call: context, RPC, scan. OK only with an o of `o_bytes` bytes.
absl::Status CallOnce(const std::shared_ptr<grpc::Channel>& channel, const grpc::ByteBuffer& request,
                      gdn::client::RawCallApi api, int64_t o_bytes, const std::string& route) {
  grpc::ClientContext context;
  if (!route.empty()) context.AddMetadata("x-gdn-route", route);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(
                           std::chrono::duration<double>(absl::GetFlag(FLAGS_deadline_s))));
  grpc::ByteBuffer response;
  grpc::Status status = gdn::client::RawUnaryCall(channel, "/gdn.v1.GdnService/Forward", &context,
                                                  request, &response, api);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  absl::StatusOr<gdn::wire::WireMessage> message = gdn::wire::WireMessage::FromByteBuffer(response);
  if (!message.ok()) return message.status();
  absl::StatusOr<gdn::wire::ForwardResponseFields> fields = gdn::wire::ScanForwardResponse(*message);
  if (!fields.ok()) return fields.status();
  if (static_cast<int64_t>(fields->o.data.size) != o_bytes) {
    return absl::InternalError(
        absl::StrFormat("o has %d bytes, expected %d", fields->o.data.size, o_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "the cheapest Forward client: gdn-min-client --server=ADDR --sessions=N --tokens=T");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  gdn::wire::KeepFreedMemoryForLargeMessages();  // as gdn-server does
  gdn::wire::SkipMutexDeadlockDetection();
  if (args.size() > 1) return Fail(std::string("unexpected argument ") + args[1], 2);
  absl::StatusOr<gdn::client::RawCallApi> api =
      gdn::client::ParseRawCallApi(absl::GetFlag(FLAGS_call_api));
  if (!api.ok()) return Fail(std::string(api.status().message()), 2);
  if (absl::GetFlag(FLAGS_calls) < 1 || absl::GetFlag(FLAGS_warmup_calls) < 0) {
    return Fail("--calls must be >= 1 and --warmup_calls >= 0", 2);
  }
  const std::string server = absl::GetFlag(FLAGS_server);
  const gdn::wire::TransportOptions transport = TransportFromFlags();
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      server, grpc::InsecureChannelCredentials(), gdn::wire::ClientChannelArguments(transport));

  // The shape: the server's.
  gdn::v1::ServerInfoResponse info;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status s = gdn::v1::GdnService::NewStub(channel)->GetServerInfo(
        &context, gdn::v1::ServerInfoRequest(), &info);
    if (!s.ok()) return Fail("GetServerInfo from " + server + ": " + s.error_message());
  }
  const gdn::echo::MinRequestShape shape{absl::GetFlag(FLAGS_sessions), absl::GetFlag(FLAGS_tokens),
                                         absl::GetFlag(FLAGS_layer)};
  absl::StatusOr<grpc::ByteBuffer> request = gdn::echo::BuildMinRequest(info.config(), shape);
  if (!request.ok()) return Fail(std::string(request.status().message()), 2);
  const int64_t o_bytes = gdn::echo::ExpectedOutputBytes(info.config(), shape);
  const std::string route = absl::GetFlag(FLAGS_route_key);

  for (int i = 0; i < absl::GetFlag(FLAGS_warmup_calls); ++i) {
    absl::Status s = CallOnce(channel, *request, *api, o_bytes, route);
    if (!s.ok()) return Fail("warm-up call: " + std::string(s.message()));
  }
  const int calls = absl::GetFlag(FLAGS_calls);
  const double max_seconds = absl::GetFlag(FLAGS_max_seconds);
  std::vector<int64_t> nanos;
  nanos.reserve(calls);
  const Clock::time_point start = Clock::now();
  const double cpu0 = CpuSeconds();
  for (int i = 0; i < calls; ++i) {
    const Clock::time_point t0 = Clock::now();
    absl::Status s = CallOnce(channel, *request, *api, o_bytes, route);
    const Clock::time_point t1 = Clock::now();
    if (!s.ok()) return Fail("call " + std::to_string(i) + ": " + std::string(s.message()));
    nanos.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    if (max_seconds > 0 && std::chrono::duration<double>(t1 - start).count() >= max_seconds) break;
  }
  // The client's own CPU per call (all its threads, gRPC's included).
  const double cpu_us_per_call = (CpuSeconds() - cpu0) * 1e6 / std::max<size_t>(1, nanos.size());
  const gdn::echo::LatencySummary summary = gdn::echo::Summarize(nanos);
  std::cout << absl::StrFormat(
      "gdn-min-client %s (%s, %s): Forward %d x %d (request %d bytes, o %d bytes), %s api, %s "
      "transport\n  calls %d  p50 %.1f us  p90 %.1f us  p99 %.1f us  mean %.1f us  (client CPU %.1f "
      "us a call)\n",
      server, info.backend(), info.device(), shape.sessions, shape.tokens, request->Length(),
      o_bytes, absl::GetFlag(FLAGS_call_api),
      absl::GetFlag(FLAGS_default_transport) ? "default" : "tuned", summary.count, summary.p50_us,
      summary.p90_us, summary.p99_us, summary.mean_us, cpu_us_per_call);
  const std::string json_out = absl::GetFlag(FLAGS_json_out);
  if (!json_out.empty()) {
    std::ofstream f(json_out, std::ios::trunc);
    f << absl::StrFormat(
        "{\"tool\": \"gdn-min-client\", \"server\": \"%s\", \"backend\": \"%s\", \"sessions\": %d, "
        "\"tokens\": %d, \"request_bytes\": %d, \"o_bytes\": %d, \"call_api\": \"%s\", "
        "\"transport\": \"%s\", \"cpu_us_per_call\": %.3f, \"latency\": %s}\n",
        server, info.backend(), shape.sessions, shape.tokens, request->Length(), o_bytes,
        absl::GetFlag(FLAGS_call_api), absl::GetFlag(FLAGS_default_transport) ? "default" : "tuned",
        cpu_us_per_call, gdn::echo::LatencySummaryJson(summary));
    if (!f) return Fail("cannot write " + json_out);
  }
  return 0;
}
