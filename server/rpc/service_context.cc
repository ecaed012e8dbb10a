#include "server/rpc/service_context.h"

#include <chrono>

namespace gdn {

absl::Time DeadlineOf(const grpc::CallbackServerContext* context) {
  const std::chrono::system_clock::time_point deadline = context->deadline();
  // gRPC reports "no deadline" as a time far in the future.
  if (deadline >= std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

absl::StatusOr<TenantScope> ServiceContext::ScopeOf(
    const grpc::CallbackServerContext& context) const {
  if (authenticator == nullptr) return TenantScope();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const absl::string_view header =
      it == metadata.end() ? absl::string_view()
                           : absl::string_view(it->second.data(), it->second.size());
  absl::StatusOr<std::shared_ptr<const Tenant>> tenant = authenticator->Authenticate(header);
  if (!tenant.ok()) return tenant.status();
  return TenantScope(std::move(*tenant));
}

}  // namespace gdn
