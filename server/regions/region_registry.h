// The regions clients registered, by (owner, name): register, unregister,
// list, and resolving a RegionRef of a Forward call into memory the server
// can use. Regions are scoped to the client that registered them: `owner`
// names that client (today one owner, "", for every caller; the tenants
// work gives each authenticated client its own), and a name resolves only
// for its owner.
//
// Thread-safe: every method may run on any thread (request threads).
#ifndef GDN_SERVER_REGIONS_REGION_REGISTRY_H_
#define GDN_SERVER_REGIONS_REGION_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gdn/v1/gdn.pb.h"
#include "kernels/backend.h"
#include "proto/forward_wire.h"
#include "server/regions/region.h"

namespace gdn {

// A RegionRef resolved: the region (held) and its bytes.
struct ResolvedRef {
  std::shared_ptr<Region> region;
  char* host = nullptr;    // null for CUDA regions
  char* device = nullptr;  // as the backend addresses it
};

class RegionRegistry {
 public:
  // `backend` registers host memory and opens IPC handles; it must outlive
  // the registry and every call holding a region.
  explicit RegionRegistry(Backend* backend) : backend_(backend) {}

  // AlreadyExists for a name the owner registered before; InvalidArgument
  // for a bad name, kind, size or handle; NotFound for a missing shm
  // object; FailedPrecondition for CUDA on a backend without CUDA.
  absl::Status Register(const std::string& owner, const gdn::v1::RegisterRegionRequest& request);
  // NotFound when the owner has no such region. Calls holding it that have
  // not started fail without running.
  absl::Status Unregister(const std::string& owner, const std::string& name);
  std::vector<gdn::v1::RegionInfo> List(const std::string& owner) const;

  // `field` names the tensor in errors. NotFound for an unknown region;
  // InvalidArgument when the ref's byte_size differs from `expected_bytes`
  // or its range leaves the region.
  absl::StatusOr<ResolvedRef> Resolve(const std::string& owner, const wire::RegionRefField& ref,
                                      int64_t expected_bytes, absl::string_view field) const;

  size_t size() const;

 private:
  Backend* backend_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Region>> regions_;
};

}  // namespace gdn

#endif  // GDN_SERVER_REGIONS_REGION_REGISTRY_H_
