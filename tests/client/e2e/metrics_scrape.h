// Scraping the server's Prometheus endpoint over a raw HTTP/1.0 socket, and
// reading values out of the text exposition format.
#ifndef GDN_TESTS_CLIENT_E2E_METRICS_SCRAPE_H_
#define GDN_TESTS_CLIENT_E2E_METRICS_SCRAPE_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace gdn::e2e {

// GET http://host_port/path; the body when the status is 200.
absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path);

// Sum of the samples of metric `name` whose labels include every entry of
// `labels` (exact sample name: "gdn_requests_total", not its _bucket series).
// 0 when there is none.
double SumSamples(const std::string& text, const std::string& name,
                  const std::map<std::string, std::string>& labels = {});

// Whether any sample line of `name` exists.
bool HasMetric(const std::string& text, const std::string& name);

}  // namespace gdn::e2e

#endif  // GDN_TESTS_CLIENT_E2E_METRICS_SCRAPE_H_
