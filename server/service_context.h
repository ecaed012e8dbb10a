// What every RPC handler and reactor of the service shares: the engine, the
// metrics and the fixed configuration. Read-only after start; the pointers
// outlive the gRPC server.
#ifndef GDN_SERVER_SERVICE_CONTEXT_H_
#define GDN_SERVER_SERVICE_CONTEXT_H_

#include <grpcpp/server_context.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gdn/v1/gdn.pb.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "server/server_config.h"

namespace gdn {

struct ServiceContext {
  Engine* engine = nullptr;
  ServerMetrics* metrics = nullptr;  // may be null
  ServerConfig config;
  gdn::v1::LayerConfig layer_config;
  std::string version;

  void RecordRequest(absl::string_view method, const absl::Status& status,
                     absl::Time start) const {
    if (metrics != nullptr) {
      metrics->RecordRequest(method, status.code(), absl::Now() - start);
    }
  }
};

// The call's deadline as absl::Time (InfiniteFuture when none).
absl::Time DeadlineOf(const grpc::CallbackServerContext* context);

}  // namespace gdn

#endif  // GDN_SERVER_SERVICE_CONTEXT_H_
