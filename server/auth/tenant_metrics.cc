#include "server/auth/tenant_metrics.h"

#include "absl/strings/str_cat.h"

namespace gdn {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

TenantMetrics::TenantMetrics(prometheus::Registry& registry)
    : requests_(BuildCounter()
                    .Name("gdn_tenant_requests_total")
                    .Help("Finished RPCs by tenant, method and status code")
                    .Register(registry)),
      refusals_(BuildCounter()
                    .Name("gdn_tenant_quota_refusals_total")
                    .Help("Calls refused RESOURCE_EXHAUSTED by a tenant quota, by quota")
                    .Register(registry)),
      sessions_(BuildGauge()
                    .Name("gdn_tenant_sessions")
                    .Help("Sessions the tenant holds (refreshed every few seconds)")
                    .Register(registry)),
      pages_(BuildGauge()
                 .Name("gdn_tenant_state_pages")
                 .Help("State pages the tenant's sessions reference, as its quota counts them")
                 .Register(registry)),
      reloads_(BuildCounter()
                   .Name("gdn_tokens_reloads_total")
                   .Help("Tokens file reloads (SIGHUP) by result")
                   .Register(registry)) {}

void TenantMetrics::RecordRequest(absl::string_view tenant, absl::string_view method,
                                  absl::StatusCode code) {
  const std::string code_name = absl::StatusCodeToString(code);
  const std::string key = absl::StrCat(tenant, std::string(1, '\0'), method,
                                       std::string(1, '\0'), code_name);
  prometheus::Counter* counter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    prometheus::Counter*& handle = request_handles_[key];
    if (handle == nullptr) {
      handle = &requests_.Add({{"tenant", std::string(tenant)},
                               {"method", std::string(method)},
                               {"code", code_name}});
    }
    counter = handle;
  }
  counter->Increment();
}

void TenantMetrics::CountQuotaRefusal(absl::string_view tenant, absl::string_view quota) {
  const std::string key = absl::StrCat(tenant, std::string(1, '\0'), quota);
  prometheus::Counter* counter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    prometheus::Counter*& handle = refusal_handles_[key];
    if (handle == nullptr) {
      handle = &refusals_.Add({{"tenant", std::string(tenant)}, {"quota", std::string(quota)}});
    }
    counter = handle;
  }
  counter->Increment();
}

void TenantMetrics::CountReload(bool ok) {
  reloads_.Add({{"result", ok ? "ok" : "error"}}).Increment();
}

void TenantMetrics::SetUsage(const std::map<std::string, TenantUsage>& usage) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [tenant, now] : usage) {
    auto& handles = usage_[tenant];
    if (handles.first == nullptr) {
      handles.first = &sessions_.Add({{"tenant", tenant}});
      handles.second = &pages_.Add({{"tenant", tenant}});
    }
  }
  for (auto& [tenant, handles] : usage_) {
    auto it = usage.find(tenant);
    handles.first->Set(it == usage.end() ? 0 : static_cast<double>(it->second.sessions));
    handles.second->Set(it == usage.end() ? 0 : static_cast<double>(it->second.state_pages));
  }
}

}  // namespace gdn
