// Refreshes the per-tenant gauges (gdn_tenant_sessions,
// gdn_tenant_state_pages) every `period` with one session command on the
// engine thread, so counting sessions never happens per call.
//
// Threading: the constructor starts a timer thread; Stop (or the
// destructor) joins it, and must come before the engine stops.
#ifndef GDN_SERVER_AUTH_TENANT_GAUGE_REFRESHER_H_
#define GDN_SERVER_AUTH_TENANT_GAUGE_REFRESHER_H_

#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/time/time.h"
#include "server/auth/tenant_metrics.h"
#include "server/engine/engine.h"

namespace gdn {

class TenantGaugeRefresher {
 public:
  TenantGaugeRefresher(Engine* engine, TenantMetrics* metrics, absl::Duration period);
  ~TenantGaugeRefresher() { Stop(); }

  TenantGaugeRefresher(const TenantGaugeRefresher&) = delete;
  TenantGaugeRefresher& operator=(const TenantGaugeRefresher&) = delete;

  void Stop();

 private:
  void Loop();

  Engine* const engine_;
  TenantMetrics* const metrics_;
  const absl::Duration period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gdn

#endif  // GDN_SERVER_AUTH_TENANT_GAUGE_REFRESHER_H_
