// Metrics by tenant (a `tenant` label; never a session id): requests by
// method and code, quota refusals, and each tenant's sessions and state
// pages (gauges refreshed on a timer by TenantGaugeRefresher, not per call),
// and token-file reloads. Registered on the server's registry only when a
// tokens file is configured.
//
//   gdn_tenant_requests_total{tenant, method, code}   counter
//   gdn_tenant_quota_refusals_total{tenant, quota}    counter
//   gdn_tenant_sessions{tenant}                       gauge
//   gdn_tenant_state_pages{tenant}                    gauge
//   gdn_tokens_reloads_total{result="ok"|"error"}     counter
//
// Threading: every method is safe from any thread (handles are cached
// under a mutex, as in ServerMetrics).
#ifndef GDN_SERVER_AUTH_TENANT_METRICS_H_
#define GDN_SERVER_AUTH_TENANT_METRICS_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "server/auth/tenant_quota.h"

namespace gdn {

class TenantMetrics {
 public:
  explicit TenantMetrics(prometheus::Registry& registry);

  void RecordRequest(absl::string_view tenant, absl::string_view method, absl::StatusCode code);
  void CountQuotaRefusal(absl::string_view tenant, absl::string_view quota);
  void CountReload(bool ok);
  // Every tenant's usage now; tenants seen before and absent now read 0.
  void SetUsage(const std::map<std::string, TenantUsage>& usage);

 private:
  std::mutex mu_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& refusals_;
  prometheus::Family<prometheus::Gauge>& sessions_;
  prometheus::Family<prometheus::Gauge>& pages_;
  prometheus::Family<prometheus::Counter>& reloads_;
  absl::flat_hash_map<std::string, prometheus::Counter*> request_handles_;  // "t\0m\0code"
  absl::flat_hash_map<std::string, prometheus::Counter*> refusal_handles_;  // "t\0quota"
  absl::flat_hash_map<std::string, std::pair<prometheus::Gauge*, prometheus::Gauge*>> usage_;
};

}  // namespace gdn

#endif  // GDN_SERVER_AUTH_TENANT_METRICS_H_
