// What the metrics port serves (server/ops/http_endpoint.h routes):
//   GET /metrics        the registry in the Prometheus text format (0.0.4)
//   GET /, GET /status  the status page: server/ops/status_page.html, a plain
//                       HTML page whose scripts scrape /metrics every 2 s and
//                       show the figures of the Grafana dashboard
//                       (deploy/grafana/gdn-serve.json) and charts of the last
//                       15 minutes, without Grafana.
//   GET /status_*.js    the page's scripts (StatusPageScripts()).
#ifndef GDN_SERVER_OPS_STATUS_PAGE_H_
#define GDN_SERVER_OPS_STATUS_PAGE_H_

#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "prometheus/registry.h"
#include "server/ops/http_endpoint.h"

namespace gdn {

// The files of server/ops/ the page is made of, embedded at build time
// (generated sources in the build directory, server/ops/CMakeLists.txt).
absl::string_view StatusPageHtml();         // status_page.html
absl::string_view StatusMetricsScript();    // status_metrics.js
absl::string_view StatusFiguresScript();    // status_figures.js
absl::string_view StatusChartDataScript();  // status_chart_data.js
absl::string_view StatusChartsScript();     // status_charts.js
absl::string_view StatusPageScript();       // status_page.js

struct StatusPageScriptFile {
  const char* name;  // in server/ops/ and at the port's root: "status_charts.js"
  absl::string_view (*bytes)();
};
// The page's scripts, in the order the page loads them.
const std::vector<StatusPageScriptFile>& StatusPageScripts();

// The routes above; /metrics collects `registry` on every request (safe from
// civetweb's worker threads: prometheus-cpp metrics are thread-safe).
HttpRoutes MetricsPortRoutes(std::shared_ptr<prometheus::Registry> registry);

}  // namespace gdn

#endif  // GDN_SERVER_OPS_STATUS_PAGE_H_
