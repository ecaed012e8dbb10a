// gdn-bench --transport=shm: Forward calls whose tensors stay in POSIX
// shared memory registered with the server (a REGION_SYSTEM region), the
// same-host path of proto RegionRef. A worker copies its request pools
// into one shm object once and registers it; each call then sends only
// references (region, offset, byte size) and names an output region that
// the server writes o into, so the gRPC messages carry no tensor bytes.
#ifndef GDN_CLIENT_BENCH_SHM_TRANSPORT_H_
#define GDN_CLIENT_BENCH_SHM_TRANSPORT_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/shared_memory_object.h"
#include "gdn/v1/gdn.grpc.pb.h"
#include "proto/forward_wire.h"

namespace gdn::client::bench {

// How a worker's Forward calls name their tensors in registered regions
// (shm here, cuda_ipc_transport.h on CUDA builds).
class RegionTransport {
 public:
  // A caller's output region (one per concurrent caller).
  class Output {
   public:
    virtual ~Output() = default;
  };
  virtual ~RegionTransport() = default;
  // Rewrites one request: every tensor whose data is one run inside a pool
  // becomes a reference (a run that wraps the pool stays inline), and o
  // goes to *out (created or grown as needed).
  virtual absl::Status UseRegions(wire::ForwardRequestParts* parts,
                                  std::unique_ptr<Output>* out) = 0;

  // The region RPCs on `channel`, for the Outputs and transports (Unregister:
  // best effort, 5 s).
  static absl::Status Register(const std::shared_ptr<grpc::Channel>& channel,
                               const v1::RegisterRegionRequest& request);
  static void Unregister(const std::shared_ptr<grpc::Channel>& channel, const std::string& name);

 protected:
  struct Pool {
    const char* base;
    size_t bytes;
    size_t offset;  // in the region
  };
  // Lays `pools` out 4 KiB-aligned in one region; returns its size.
  static size_t LayOut(const std::vector<std::pair<const char*, size_t>>& spans,
                       std::vector<Pool>* pools);
  // The tensor references of ReplaceRuns; returns o's byte size.
  static size_t ReferencePools(const std::vector<Pool>& pools, const std::string& region,
                               wire::ForwardRequestParts* parts);
  static std::string UniqueName(const std::string& what);
};

// A shm object created here, mapped and registered under `name`;
// unregistered, unmapped and unlinked when it goes.
class ShmRegion final : public RegionTransport::Output {
 public:
  static absl::StatusOr<std::unique_ptr<ShmRegion>> Create(std::shared_ptr<grpc::Channel> channel,
                                                           const std::string& name, size_t bytes);
  ~ShmRegion() override;
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  const std::string& name() const { return name_; }
  char* data() { return shm_->data(); }
  size_t size() const { return shm_->size(); }

 private:
  ShmRegion() = default;
  std::shared_ptr<grpc::Channel> channel_;
  std::string name_;
  std::unique_ptr<SharedMemoryObject> shm_;  // unregistered (destructor) before it goes
  bool registered_ = false;
};

class ShmTransport final : public RegionTransport {
 public:
  // Copies `pools` (memory that requests' tensor runs point into) into one
  // registered region.
  static absl::StatusOr<std::unique_ptr<ShmTransport>> Create(
      std::shared_ptr<grpc::Channel> channel,
      const std::vector<std::pair<const char*, size_t>>& pools);

  absl::Status UseRegions(wire::ForwardRequestParts* parts,
                          std::unique_ptr<Output>* out) override;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::vector<Pool> pools_;
  std::unique_ptr<ShmRegion> inputs_;
};

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_SHM_TRANSPORT_H_
