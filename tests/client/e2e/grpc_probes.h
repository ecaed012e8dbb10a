// Calls to the standard services a gdn-server exposes beside gdn.v1:
// grpc.health.v1.Health/Check and grpc.reflection.v1alpha.ServerReflection.
// Their protos are not installed with Debian's gRPC, so the few fields used
// are encoded by hand (field numbers from the public service definitions)
// and sent through a generic stub.
#ifndef GDN_TESTS_CLIENT_E2E_GRPC_PROBES_H_
#define GDN_TESTS_CLIENT_E2E_GRPC_PROBES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"

namespace gdn::e2e {

// HealthCheckResponse.status: 1 SERVING, 2 NOT_SERVING, 3 SERVICE_UNKNOWN.
absl::StatusOr<int> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service);

// The services named by reflection's list_services.
absl::StatusOr<std::vector<std::string>> ReflectionListServices(
    const std::shared_ptr<grpc::Channel>& channel);

}  // namespace gdn::e2e

#endif  // GDN_TESTS_CLIENT_E2E_GRPC_PROBES_H_
