#include "server/auth/tenant_gauge_refresher.h"

#include "server/auth/tenant_quota.h"

namespace gdn {

TenantGaugeRefresher::TenantGaugeRefresher(Engine* engine, TenantMetrics* metrics,
                                           absl::Duration period)
    : engine_(engine), metrics_(metrics), period_(period) {
  thread_ = std::thread([this] { Loop(); });
}

void TenantGaugeRefresher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TenantGaugeRefresher::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    TenantMetrics* metrics = metrics_;
    // Fire and forget: the command runs on the engine thread with the
    // cache, after the calls queued before it.
    engine_->RunSessionCommand(
        "", [metrics](StateCache& cache) { metrics->SetUsage(MeasureTenants(cache)); });
    lock.lock();
    cv_.wait_for(lock, absl::ToChronoMilliseconds(period_), [this] { return stop_; });
  }
}

}  // namespace gdn
