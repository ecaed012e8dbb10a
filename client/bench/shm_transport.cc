#include "client/bench/shm_transport.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/grpc_status.h"

namespace gdn::client::bench {
namespace {

size_t Align(size_t n) { return (n + 4095) / 4096 * 4096; }

}  // namespace

std::string RegionTransport::UniqueName(const std::string& what) {
  static std::atomic<int> next{0};
  return absl::StrCat("gdn-bench-", getpid(), "-", what, "-", next.fetch_add(1));
}

absl::Status RegionTransport::Register(const std::shared_ptr<grpc::Channel>& channel,
                                       const v1::RegisterRegionRequest& request) {
  v1::RegisterRegionResponse response;
  grpc::ClientContext context;
  return FromGrpcStatus(
      v1::GdnService::NewStub(channel)->RegisterRegion(&context, request, &response));
}

void RegionTransport::Unregister(const std::shared_ptr<grpc::Channel>& channel,
                                 const std::string& name) {
  v1::UnregisterRegionRequest request;
  request.set_name(name);
  v1::UnregisterRegionResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  (void)v1::GdnService::NewStub(channel)->UnregisterRegion(&context, request, &response);
}

size_t RegionTransport::LayOut(const std::vector<std::pair<const char*, size_t>>& spans,
                               std::vector<Pool>* pools) {
  size_t total = 0;
  for (const auto& [base, bytes] : spans) {
    pools->push_back({base, bytes, total});
    total += Align(bytes);
  }
  return std::max<size_t>(total, 4096);
}

size_t RegionTransport::ReferencePools(const std::vector<Pool>& pools, const std::string& region,
                                       wire::ForwardRequestParts* parts) {
  for (wire::TensorParts* t : {&parts->q, &parts->k, &parts->v, &parts->g, &parts->beta, &parts->a,
                               &parts->b, &parts->a_log, &parts->dt_bias}) {
    if (t->data.size() != 1) continue;  // absent, or wrapping the pool: inline
    const char* at = static_cast<const char*>(t->data[0].data);
    for (const Pool& p : pools) {
      if (at < p.base || at + t->data[0].size > p.base + p.bytes) continue;
      t->has_ref = true;
      t->ref = {region, static_cast<int64_t>(p.offset + (at - p.base)),
                static_cast<int64_t>(t->data[0].size)};
      t->data.clear();
      break;
    }
  }
  // o has v's size: [T, Hv, V] in the activation dtype.
  size_t o_bytes = parts->v.has_ref ? static_cast<size_t>(parts->v.ref.byte_size) : 0;
  for (const wire::BytesRef& r : parts->v.data) o_bytes += r.size;
  return o_bytes;
}

absl::StatusOr<std::unique_ptr<ShmRegion>> ShmRegion::Create(
    std::shared_ptr<grpc::Channel> channel, const std::string& name, size_t bytes) {
  std::unique_ptr<ShmRegion> r(new ShmRegion());
  r->channel_ = std::move(channel);
  r->name_ = name;
  absl::StatusOr<std::unique_ptr<SharedMemoryObject>> shm =
      SharedMemoryObject::Create("/" + name, bytes);
  if (!shm.ok()) return shm.status();
  r->shm_ = std::move(*shm);
  v1::RegisterRegionRequest request;
  request.set_name(name);
  request.set_kind(v1::REGION_SYSTEM);
  request.set_key(r->shm_->key());
  request.set_byte_size(static_cast<int64_t>(bytes));
  if (absl::Status s = RegionTransport::Register(r->channel_, request); !s.ok()) return s;
  r->registered_ = true;
  return r;
}

ShmRegion::~ShmRegion() {
  if (registered_) RegionTransport::Unregister(channel_, name_);
}

absl::StatusOr<std::unique_ptr<ShmTransport>> ShmTransport::Create(
    std::shared_ptr<grpc::Channel> channel,
    const std::vector<std::pair<const char*, size_t>>& pools) {
  std::unique_ptr<ShmTransport> t(new ShmTransport());
  t->channel_ = channel;
  const size_t total = LayOut(pools, &t->pools_);
  absl::StatusOr<std::unique_ptr<ShmRegion>> region =
      ShmRegion::Create(channel, UniqueName("inputs"), total);
  if (!region.ok()) return region.status();
  t->inputs_ = std::move(*region);
  for (const Pool& p : t->pools_) std::memcpy(t->inputs_->data() + p.offset, p.base, p.bytes);
  return t;
}

absl::Status ShmTransport::UseRegions(wire::ForwardRequestParts* parts,
                                      std::unique_ptr<Output>* out) {
  const size_t o_bytes = ReferencePools(pools_, inputs_->name(), parts);
  auto* o = static_cast<ShmRegion*>(out->get());
  if (o == nullptr || o->size() < o_bytes) {
    out->reset();  // unregisters the smaller one
    absl::StatusOr<std::unique_ptr<ShmRegion>> region =
        ShmRegion::Create(channel_, UniqueName("o"), std::max<size_t>(Align(o_bytes), 1 << 20));
    if (!region.ok()) return region.status();
    o = region->get();
    *out = std::move(*region);
  }
  parts->has_o_region = true;
  parts->o_region = {o->name(), 0, static_cast<int64_t>(o_bytes)};
  return absl::OkStatus();
}

}  // namespace gdn::client::bench
