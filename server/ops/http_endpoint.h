// A small HTTP/1.1 server for the metrics port (civetweb underneath): GET and
// HEAD on a fixed set of exact paths, each answered by a handler that builds
// the whole response in memory. Any other path is 404, any other method 405.
// No files are served from disk.
//
// Why not prometheus::Exposer: it can only serve registries (no status page)
// and its civetweb listener takes up to 2 s to stop, which every in-process
// server test paid. Stop() here returns within milliseconds.
//
// Threading: handlers run on civetweb's worker threads, several at a time,
// and must be thread-safe. Start, Stop, port() and the destructor are for the
// owning thread.
#ifndef GDN_SERVER_OPS_HTTP_ENDPOINT_H_
#define GDN_SERVER_OPS_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

struct mg_context;
struct mg_connection;

namespace gdn {

struct HttpResponse {
  int status = 200;
  std::string content_type;  // e.g. "text/html; charset=utf-8"
  std::string body;
};

using HttpHandler = std::function<HttpResponse()>;
// Exact request path (no query string) -> its handler.
using HttpRoutes = absl::flat_hash_map<std::string, HttpHandler>;

class HttpEndpoint {
 public:
  // listen: "HOST:PORT" with a numeric host ("127.0.0.1:9464", "0.0.0.0:0",
  // "[::1]:9464"); port 0 binds a free port, port() tells which. A port that
  // cannot be bound is UNAVAILABLE with civetweb's reason; a malformed
  // address INVALID_ARGUMENT.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& listen, HttpRoutes routes, int num_threads = 2);
  ~HttpEndpoint();  // Stop()

  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // The bound port.
  int port() const { return port_; }

  // Closes the listener and joins civetweb's threads after the requests in
  // progress finish. Idempotent.
  void Stop();

 private:
  HttpEndpoint() = default;

  // civetweb's request callback; `self` is the HttpEndpoint.
  static int HandleRequest(mg_connection* connection, void* self);
  // One connection to our own listener: wakes civetweb's accept loop, which
  // otherwise notices a stop only when its 2 s poll() times out.
  void WakeListener() const;

  HttpRoutes routes_;
  mg_context* context_ = nullptr;
  std::string wake_host_;  // where WakeListener connects (a wildcard -> loopback)
  int port_ = 0;
};

}  // namespace gdn

#endif  // GDN_SERVER_OPS_HTTP_ENDPOINT_H_
