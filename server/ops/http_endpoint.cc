#include "server/ops/http_endpoint.h"

#include <civetweb.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gdn {
namespace {

// "HOST:PORT" -> the host without IPv6 brackets, for WakeListener. The
// wildcard addresses are reached through the loopback of their family.
absl::StatusOr<std::string> WakeHostOf(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(listen).substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected HOST:PORT, got '", listen, "'"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "0.0.0.0") return std::string("127.0.0.1");
  if (host == "::") return std::string("::1");
  return host;
}

// civetweb's error text ends with a newline in some versions.
std::string Trimmed(const char* text) {
  std::string s(text);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& listen, HttpRoutes routes, int num_threads) {
  absl::StatusOr<std::string> wake_host = WakeHostOf(listen);
  if (!wake_host.ok()) return wake_host.status();

  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint());
  endpoint->routes_ = std::move(routes);
  endpoint->wake_host_ = *wake_host;

  // Reference-counted in civetweb; balanced by mg_exit_library in Stop().
  mg_init_library(0);
  const std::string threads = absl::StrCat(num_threads);
  // No document_root: nothing on disk is ever served. Keep-alive off: every
  // response ends its connection, so Stop() never waits on an idle client.
  const char* options[] = {"listening_ports", listen.c_str(),
                           "num_threads",     threads.c_str(),
                           "enable_keep_alive", "no",
                           nullptr};
  mg_callbacks callbacks = {};
  // Silence civetweb's own logging: failures come back as a status.
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };
  mg_init_data init = {};
  init.callbacks = &callbacks;
  init.user_data = endpoint.get();
  init.configuration_options = options;
  char error_text[256] = {};
  unsigned error_code = 0;
  mg_error_data error = {};
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  endpoint->context_ = mg_start2(&init, &error);
  if (endpoint->context_ == nullptr) {
    mg_exit_library();
    return absl::UnavailableError(absl::StrCat(
        "could not listen on ", listen, ": ",
        error_text[0] != '\0' ? Trimmed(error_text) : "civetweb failed"));
  }
  // "/" matches every path; HandleRequest looks the exact path up.
  mg_set_request_handler(endpoint->context_, "/", &HttpEndpoint::HandleRequest,
                         endpoint.get());

  mg_server_port ports[4] = {};
  const int num_ports = mg_get_server_ports(endpoint->context_, 4, ports);
  if (num_ports < 1 || ports[0].port <= 0) {
    endpoint->Stop();
    return absl::UnavailableError(
        absl::StrCat("could not listen on ", listen, ": no bound port"));
  }
  endpoint->port_ = ports[0].port;
  return endpoint;
}

HttpEndpoint::~HttpEndpoint() { Stop(); }

void HttpEndpoint::Stop() {
  if (context_ == nullptr) return;
  // mg_stop blocks until civetweb's accept loop sees the stop flag, which it
  // checks only after poll() returns: up to 2 s when idle. Poke the listener
  // until mg_stop is through; a poke before the flag is set is an ordinary
  // empty connection that a worker closes.
  std::atomic<bool> stopped{false};
  std::thread stopper([this, &stopped] {
    mg_stop(context_);
    stopped.store(true);
  });
  while (!stopped.load()) {
    WakeListener();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stopper.join();
  context_ = nullptr;
  mg_exit_library();
}

void HttpEndpoint::WakeListener() const {
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  const std::string port = absl::StrCat(port_);
  if (getaddrinfo(wake_host_.c_str(), port.c_str(), &hints, &addresses) != 0) {
    return;
  }
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                          a->ai_protocol);
    if (fd < 0) continue;
    // A local connect completes (or is refused) at once.
    const bool connected = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
    if (connected) break;
  }
  freeaddrinfo(addresses);
}

int HttpEndpoint::HandleRequest(mg_connection* connection, void* self) {
  const HttpEndpoint& endpoint = *static_cast<const HttpEndpoint*>(self);
  const mg_request_info* request = mg_get_request_info(connection);
  const absl::string_view method =
      request->request_method != nullptr ? request->request_method : "";
  const bool head = method == "HEAD";
  HttpResponse response;
  if (method != "GET" && !head) {
    response = {405, "text/plain; charset=utf-8", "method not allowed\n"};
  } else {
    const char* path = request->local_uri != nullptr ? request->local_uri : "";
    auto route = endpoint.routes_.find(path);
    if (route == endpoint.routes_.end()) {
      response = {404, "text/plain; charset=utf-8",
                  absl::StrCat("not found: ", path, "\n")};
    } else {
      response = route->second();
    }
  }
  mg_printf(connection,
            "HTTP/1.1 %d %s\r\n"
            "Content-Type: %s\r\n"
            "Content-Length: %zu\r\n"
            "Cache-Control: no-store\r\n"
            "Connection: close\r\n",
            response.status,
            mg_get_response_code_text(connection, response.status),
            response.content_type.c_str(), response.body.size());
  if (response.status == 405) mg_printf(connection, "Allow: GET, HEAD\r\n");
  mg_printf(connection, "\r\n");
  if (!head) mg_write(connection, response.body.data(), response.body.size());
  return response.status;  // 1..999: handled, the status for civetweb's log
}

}  // namespace gdn
