#include "bench/echo/echo_server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "bench/echo/echo_service.h"
#include "proto/grpc_transport.h"

namespace gdn::echo {
namespace {

// The host part of "HOST:PORT" ("[::1]:0" -> "[::1]").
std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

// A socket file left by an earlier run would make the bind fail.
void RemoveStaleSocket(const std::string& path) {
  struct stat st;
  if (!path.empty() && stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path.c_str());
}

}  // namespace

absl::StatusOr<std::unique_ptr<EchoServer>> EchoServer::Start(const EchoOptions& options) {
  if (absl::Status s = ValidateEchoOptions(options); !s.ok()) return s;
  std::unique_ptr<EchoServer> echo(new EchoServer());
  echo->options_ = options;
  echo->service_ = MakeEchoService(options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  if (options.default_transport) {
    wire::TransportOptions limits_only;
    limits_only.max_message_bytes = options.transport.max_message_bytes;
    limits_only.stream_window_bytes = 0;
    limits_only.max_frame_bytes = 0;
    limits_only.max_read_chunk_bytes = 0;
    wire::ApplyServerTransport(limits_only, &builder);
  } else {
    wire::ApplyServerTransport(options.transport, &builder);
  }
  const bool unix_socket = wire::IsUnixAddress(options.listen);
  if (unix_socket) RemoveStaleSocket(wire::UnixSocketPath(options.listen));
  int bound_port = 0;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(echo->service_.get());
  echo->server_ = builder.BuildAndStart();
  if (echo->server_ == nullptr || bound_port == 0) {
    return absl::UnavailableError(absl::StrCat("gdn-echo: could not listen on ", options.listen));
  }
  echo->address_ =
      unix_socket ? options.listen : absl::StrCat(HostOf(options.listen), ":", bound_port);
  if (grpc::HealthCheckServiceInterface* health = echo->server_->GetHealthCheckService()) {
    health->SetServingStatus(true);
    health->SetServingStatus(v1::GdnService::service_full_name(), true);
  }
  return echo;
}

EchoServer::~EchoServer() { Shutdown(); }

void EchoServer::Shutdown() {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  if (wire::IsUnixAddress(address_)) RemoveStaleSocket(wire::UnixSocketPath(address_));
}

}  // namespace gdn::echo
