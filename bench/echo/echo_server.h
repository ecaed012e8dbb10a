// A running gdn-echo: the echo service of options.mode (echo_service.h)
// behind a gRPC server with the transport settings of proto/grpc_transport.h
// (or gRPC's defaults), and the standard health service, SERVING.
// In-process for tests, and gdn-echo's main.
#ifndef GDN_BENCH_ECHO_ECHO_SERVER_H_
#define GDN_BENCH_ECHO_ECHO_SERVER_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bench/echo/echo_options.h"

namespace gdn::echo {

class EchoServer {
 public:
  // InvalidArgument for bad options; Unavailable when it cannot listen.
  static absl::StatusOr<std::unique_ptr<EchoServer>> Start(const EchoOptions& options);
  ~EchoServer();  // Shutdown()

  // "HOST:PORT" with the port actually bound, or the "unix:/path" listened on.
  const std::string& address() const { return address_; }
  const EchoOptions& options() const { return options_; }

  // Stops accepting and waits (at most a second) for calls in flight.
  void Shutdown();

 private:
  EchoServer() = default;

  EchoOptions options_;
  std::string address_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

}  // namespace gdn::echo

#endif  // GDN_BENCH_ECHO_ECHO_SERVER_H_
