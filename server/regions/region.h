// A memory region a same-host client registered (RegisterRegion): POSIX
// shared memory the server mapped, or another process's GPU memory opened
// from its CUDA IPC handle. Forward calls name byte ranges of it instead of
// sending tensor bytes (proto: RegionRef); region_registry.h owns the names.
//
// Lifetime: the registry holds a Region while it is registered; every call
// that uses it holds it too (RegionHold), so unregistering never unmaps
// memory a batch may still read or write - the last holder does. A region
// unregistered while calls hold it is `revoked`: those that have not
// started fail without running (FAILED_PRECONDITION, states unchanged);
// one already on the device completes, its memory still mapped.
#ifndef GDN_SERVER_REGIONS_REGION_H_
#define GDN_SERVER_REGIONS_REGION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gdn/v1/gdn.pb.h"

namespace gdn {

struct Region {
  std::string owner;  // the client that registered it (region_registry.h)
  std::string name;
  gdn::v1::RegionKind kind = gdn::v1::REGION_KIND_UNSPECIFIED;
  std::string key;    // SYSTEM: the shm object's name
  int32_t device_id = 0;
  int64_t offset = 0;     // within the shm object / the IPC allocation
  int64_t byte_size = 0;

  // Byte 0 of the region as this process's CPU reads it (SYSTEM; null for
  // CUDA regions) and as the backend's copies and kernels address it.
  char* host = nullptr;
  char* device = nullptr;
  bool host_readable() const { return host != nullptr; }

  // Released when the last holder lets go, in reverse order of declaration:
  // the backend's registration of host memory, then the mapping itself.
  std::shared_ptr<void> mapping;
  std::shared_ptr<void> registration;

  std::atomic<bool> revoked{false};
  std::atomic<int64_t> calls_in_flight{0};
};

// One call's hold on the regions it names: counted in calls_in_flight while
// it lives.
class RegionHold {
 public:
  RegionHold() = default;
  ~RegionHold() {
    for (const auto& r : regions_) r->calls_in_flight.fetch_sub(1);
  }
  RegionHold(const RegionHold&) = delete;
  RegionHold& operator=(const RegionHold&) = delete;

  void Add(std::shared_ptr<Region> region) {
    for (const auto& r : regions_) {
      if (r == region) return;
    }
    region->calls_in_flight.fetch_add(1);
    regions_.push_back(std::move(region));
  }
  bool empty() const { return regions_.empty(); }
  // The first region that was unregistered since the call took it, or null.
  const Region* FirstRevoked() const {
    for (const auto& r : regions_) {
      if (r->revoked.load()) return r.get();
    }
    return nullptr;
  }

 private:
  std::vector<std::shared_ptr<Region>> regions_;
};

}  // namespace gdn

#endif  // GDN_SERVER_REGIONS_REGION_H_
