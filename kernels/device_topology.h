// Which GPUs of a host one server may use: the device it runs on
// (gdn-server --device=N) and the devices whose memory it may read and
// write through CUDA IPC regions (peer access). Pure functions over a
// plain description of the host, so they are tested without a GPU; the
// cuda backend fills the description from the driver
// (kernels/cuda/cuda_regions.cc) and asks these functions.
//
// Device ordinals are those of the process asking: CUDA numbers only the
// devices CUDA_VISIBLE_DEVICES lets it see, from 0.
#ifndef GDN_KERNELS_DEVICE_TOPOLOGY_H_
#define GDN_KERNELS_DEVICE_TOPOLOGY_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gdn {

// The CUDA devices one process sees and which may access which.
struct PeerTopology {
  int device_count = 0;
  // [device_count * device_count], row-major: can_access[from * n + to] is
  // cudaDeviceCanAccessPeer(from, to): kernels on `from` may read and write
  // memory allocated on `to`. The diagonal is ignored (a device always
  // reaches its own memory).
  std::vector<bool> can_access;

  // Whether `from` may access `to`'s memory (true when from == to); false
  // for ordinals out of range.
  bool CanAccess(int from, int to) const;
};

// InvalidArgument naming --device when `device` is not one of the
// `device_count` devices this process sees (the message names
// CUDA_VISIBLE_DEVICES, which renumbers them); FailedPrecondition when the
// process sees no device at all.
absl::Status ValidateDeviceIndex(int device, int device_count);

// How a server on `server_device` reaches a region allocated on
// `region_device`.
enum class RegionAccess {
  kSameDevice,  // the server's own memory
  kPeer,        // another GPU of the host, over peer access (NVLink / PCIe)
};

// kSameDevice or kPeer when the server may use the region copy-free;
// FailedPrecondition naming both devices when the topology gives the
// server's device no peer access to the region's; InvalidArgument when
// either ordinal is not a device of the topology.
absl::StatusOr<RegionAccess> DecideRegionAccess(int server_device, int region_device,
                                                const PeerTopology& topology);

}  // namespace gdn

#endif  // GDN_KERNELS_DEVICE_TOPOLOGY_H_
