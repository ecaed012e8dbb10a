#include "server/regions/region_registry.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/regions/shared_memory.h"

namespace gdn {
namespace {

constexpr size_t kMaxNameLength = 128;

absl::Status CheckName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= kMaxNameLength;
  for (const char c : name) {
    ok = ok && (absl::ascii_isalnum(c) || c == '.' || c == '_' || c == ':' || c == '/' ||
                c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "name: 1..", kMaxNameLength, " characters of [A-Za-z0-9._:/-], got '",
      name.substr(0, kMaxNameLength), name.size() > kMaxNameLength ? "...'" : "'"));
}

// "[offset, offset + bytes)" for messages, without overflowing int64: a
// client may send an offset near 2^63 (signed overflow is undefined; found
// by tests/fuzz/forward_request_reader_fuzz.cc). When both are >= 0 the end
// is exact in uint64; otherwise the sum cannot overflow (bytes is never < 0
// here).
std::string ByteRange(int64_t offset, int64_t bytes) {
  if (offset >= 0 && bytes >= 0) {
    return absl::StrCat("[", offset, ", ",
                        static_cast<uint64_t>(offset) + static_cast<uint64_t>(bytes), ")");
  }
  return absl::StrCat("[", offset, ", +", bytes, ")");
}

}  // namespace

absl::Status RegionRegistry::Register(const std::string& owner,
                                      const gdn::v1::RegisterRegionRequest& request) {
  if (absl::Status s = CheckName(request.name()); !s.ok()) return s;
  if (request.byte_size() <= 0 || request.offset() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("byte_size must be > 0 and offset >= 0, got ",
                                                   request.byte_size(), " and ",
                                                   request.offset()));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (regions_.count({owner, request.name()}) > 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("region '", request.name(), "' is already registered; unregister it "
                       "first to register it again"));
    }
  }
  auto region = std::make_shared<Region>();
  region->owner = owner;
  region->name = request.name();
  region->kind = request.kind();
  region->offset = request.offset();
  region->byte_size = request.byte_size();
  switch (request.kind()) {
    case gdn::v1::REGION_SYSTEM: {
      region->key = request.key();
      absl::StatusOr<SharedMemoryMapping> m =
          MapSharedMemory(request.key(), request.offset(), request.byte_size());
      if (!m.ok()) return m.status();
      region->mapping = std::move(m->mapping);
      region->host = m->data;
      absl::StatusOr<Backend::HostRegistration> reg =
          backend_->RegisterHostMemory(region->host, static_cast<size_t>(region->byte_size));
      if (!reg.ok()) return reg.status();
      region->registration = std::move(reg->handle);
      region->device = reg->device_address;
      break;
    }
    case gdn::v1::REGION_CUDA: {
      region->device_id = request.device_id();
      absl::StatusOr<Backend::DeviceMapping> m =
          backend_->OpenIpcMemory(request.cuda_ipc_handle(), request.device_id());
      if (!m.ok()) return m.status();
      if (static_cast<uint64_t>(request.offset()) > m->bytes ||
          static_cast<uint64_t>(request.byte_size()) > m->bytes - request.offset()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "byte_size: ", ByteRange(request.offset(), request.byte_size()),
            " lies past the end of the IPC allocation (", m->bytes, " bytes)"));
      }
      region->mapping = std::move(m->handle);
      region->device = m->base + request.offset();
      break;
    }
    default:
      return absl::InvalidArgumentError(
          "kind: REGION_SYSTEM (POSIX shared memory) or REGION_CUDA (a CUDA IPC handle)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = regions_.emplace(std::pair{owner, request.name()}, std::move(region));
  if (!inserted) {  // a concurrent Register of the same name won
    return absl::AlreadyExistsError(
        absl::StrCat("region '", request.name(), "' is already registered"));
  }
  return absl::OkStatus();
}

absl::Status RegionRegistry::Unregister(const std::string& owner, const std::string& name) {
  std::shared_ptr<Region> region;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find({owner, name});
    if (it == regions_.end()) {
      return absl::NotFoundError(absl::StrCat("no region '", name, "' is registered"));
    }
    region = std::move(it->second);
    regions_.erase(it);
  }
  region->revoked = true;  // calls holding it that have not started fail
  return absl::OkStatus();
}

std::vector<gdn::v1::RegionInfo> RegionRegistry::List(const std::string& owner) const {
  std::vector<gdn::v1::RegionInfo> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, r] : regions_) {
    if (key.first != owner) continue;
    gdn::v1::RegionInfo info;
    info.set_name(r->name);
    info.set_kind(r->kind);
    info.set_key(r->key);
    info.set_device_id(r->device_id);
    info.set_offset(r->offset);
    info.set_byte_size(r->byte_size);
    info.set_calls_in_flight(r->calls_in_flight.load());
    out.push_back(std::move(info));
  }
  return out;
}

absl::StatusOr<ResolvedRef> RegionRegistry::Resolve(const std::string& owner,
                                                    const wire::RegionRefField& ref,
                                                    int64_t expected_bytes,
                                                    absl::string_view field) const {
  std::shared_ptr<Region> region;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = regions_.find({owner, ref.region});
    if (it != regions_.end()) region = it->second;
  }
  if (region == nullptr) {
    return absl::NotFoundError(absl::StrCat(field, ".ref.region: no region '", ref.region,
                                            "' is registered (RegisterRegion first)"));
  }
  if (ref.byte_size != expected_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".ref.byte_size: expected ",
                                                   expected_bytes, " bytes, got ",
                                                   ref.byte_size));
  }
  if (ref.offset < 0 || ref.offset > region->byte_size ||
      ref.byte_size > region->byte_size - ref.offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".ref: bytes ", ByteRange(ref.offset, ref.byte_size), " lie outside region '",
        ref.region, "' (", region->byte_size, " bytes)"));
  }
  ResolvedRef out;
  out.host = region->host != nullptr ? region->host + ref.offset : nullptr;
  out.device = region->device + ref.offset;
  out.region = std::move(region);
  return out;
}

size_t RegionRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.size();
}

}  // namespace gdn
