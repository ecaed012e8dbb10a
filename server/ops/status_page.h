// What the metrics port serves (server/ops/http_endpoint.h routes):
//   GET /metrics        the registry in the Prometheus text format (0.0.4)
//   GET /, GET /status  the status page: server/ops/status_page.html, a plain
//                       HTML page whose inline script scrapes /metrics every
//                       2 s and shows the figures of the Grafana dashboard
//                       (deploy/grafana/gdn-serve.json) without Grafana.
#ifndef GDN_SERVER_OPS_STATUS_PAGE_H_
#define GDN_SERVER_OPS_STATUS_PAGE_H_

#include <memory>

#include "absl/strings/string_view.h"
#include "prometheus/registry.h"
#include "server/ops/http_endpoint.h"

namespace gdn {

// server/ops/status_page.html, embedded at build time (a generated source in the
// build directory, server/CMakeLists.txt).
absl::string_view StatusPageHtml();

// The routes above; /metrics collects `registry` on every request (safe from
// civetweb's worker threads: prometheus-cpp metrics are thread-safe).
HttpRoutes MetricsPortRoutes(std::shared_ptr<prometheus::Registry> registry);

}  // namespace gdn

#endif  // GDN_SERVER_OPS_STATUS_PAGE_H_
