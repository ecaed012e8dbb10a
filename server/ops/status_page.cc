#include "server/ops/status_page.h"

#include <string>
#include <utility>

#include "prometheus/text_serializer.h"

namespace gdn {

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
  return routes;
}

}  // namespace gdn
