#include "server/ops/status_page.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace gdn {

const std::vector<StatusPageScriptFile>& StatusPageScripts() {
  static const auto* const scripts = new std::vector<StatusPageScriptFile>{
      {"status_metrics.js", StatusMetricsScript},
      {"status_figures.js", StatusFiguresScript},
      {"status_chart_data.js", StatusChartDataScript},
      {"status_charts.js", StatusChartsScript},
      {"status_page.js", StatusPageScript},
  };
  return *scripts;
}

HttpRoutes MetricsPortRoutes(std::shared_ptr<prometheus::Registry> registry) {
  HttpRoutes routes;
  routes["/metrics"] = [registry = std::move(registry)] {
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8",
                        prometheus::TextSerializer().Serialize(
                            registry->Collect())};
  };
  const HttpHandler page = [] {
    return HttpResponse{200, "text/html; charset=utf-8",
                        std::string(StatusPageHtml())};
  };
  routes["/"] = page;
  routes["/status"] = page;
  for (const StatusPageScriptFile& script : StatusPageScripts()) {
    routes[absl::StrCat("/", script.name)] = [bytes = script.bytes] {
      return HttpResponse{200, "text/javascript; charset=utf-8",
                          std::string(bytes())};
    };
  }
  return routes;
}

}  // namespace gdn
