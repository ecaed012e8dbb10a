// RegisterRegion, UnregisterRegion and ListRegions: the registry's methods
// (server/regions/region_registry.h) behind the service. Each runs on the
// request thread; none touches the engine.
#include "server/rpc/gdn_service.h"

namespace gdn {
namespace {

absl::Status NoRegions() {
  return absl::FailedPreconditionError("this server does not accept memory regions");
}

}  // namespace

grpc::ServerUnaryReactor* GdnServiceImpl::RegisterRegion(
    grpc::CallbackServerContext* context, const gdn::v1::RegisterRegionRequest* request,
    gdn::v1::RegisterRegionResponse* /*response*/) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  TenantScope scope;
  if (!Authenticate(*context, reactor, "RegisterRegion", start, &scope)) return reactor;
  FinishUnary(reactor, "RegisterRegion", start,
              service_->regions == nullptr
                  ? NoRegions()
                  : service_->regions->Register(scope.owner(), *request),
              scope);
  return reactor;
}

grpc::ServerUnaryReactor* GdnServiceImpl::UnregisterRegion(
    grpc::CallbackServerContext* context, const gdn::v1::UnregisterRegionRequest* request,
    gdn::v1::UnregisterRegionResponse* /*response*/) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  TenantScope scope;
  if (!Authenticate(*context, reactor, "UnregisterRegion", start, &scope)) return reactor;
  FinishUnary(reactor, "UnregisterRegion", start,
              service_->regions == nullptr
                  ? NoRegions()
                  : service_->regions->Unregister(scope.owner(), request->name()),
              scope);
  return reactor;
}

grpc::ServerUnaryReactor* GdnServiceImpl::ListRegions(grpc::CallbackServerContext* context,
                                                      const gdn::v1::ListRegionsRequest*,
                                                      gdn::v1::ListRegionsResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  TenantScope scope;
  if (!Authenticate(*context, reactor, "ListRegions", start, &scope)) return reactor;
  if (service_->regions != nullptr) {
    for (gdn::v1::RegionInfo& info : service_->regions->List(scope.owner())) {
      *response->add_regions() = std::move(info);
    }
  }
  FinishUnary(reactor, "ListRegions", start, absl::OkStatus(), scope);
  return reactor;
}

}  // namespace gdn
