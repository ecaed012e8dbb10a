#include "kernels/device_topology.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace gdn {
namespace {

// " (CUDA_VISIBLE_DEVICES=...)" when the variable is set, else "".
std::string VisibleDevicesNote() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return "";
  return absl::StrCat(" (CUDA_VISIBLE_DEVICES=", visible, ")");
}

}  // namespace

bool PeerTopology::CanAccess(int from, int to) const {
  if (from < 0 || to < 0 || from >= device_count || to >= device_count) return false;
  if (from == to) return true;
  const size_t index = static_cast<size_t>(from) * device_count + to;
  return index < can_access.size() && can_access[index];
}

absl::Status ValidateDeviceIndex(int device, int device_count) {
  if (device_count <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device=", device, ": this process sees no CUDA device", VisibleDevicesNote()));
  }
  if (device < 0 || device >= device_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device=", device, " is out of range: this process sees ", device_count,
        " CUDA device(s), numbered 0..", device_count - 1, VisibleDevicesNote(),
        "; --device counts only the devices CUDA_VISIBLE_DEVICES leaves visible"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RegionAccess> DecideRegionAccess(int server_device, int region_device,
                                                const PeerTopology& topology) {
  const int n = topology.device_count;
  if (server_device < 0 || server_device >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this server's device ", server_device, " is not one of the ", n,
        " CUDA device(s) it sees"));
  }
  if (region_device < 0 || region_device >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device_id: the region is on device ", region_device, ", but the server (on device ",
        server_device, ") sees ", n, " CUDA device(s), numbered 0..", n - 1,
        VisibleDevicesNote()));
  }
  if (server_device == region_device) return RegionAccess::kSameDevice;
  if (topology.CanAccess(server_device, region_device)) return RegionAccess::kPeer;
  return absl::FailedPreconditionError(absl::StrCat(
      "device_id: the region is on device ", region_device, " and this server runs on device ",
      server_device, ", and device ", server_device, " has no peer access to device ",
      region_device, "'s memory on this host (cudaDeviceCanAccessPeer is false): call the "
      "server that owns device ", region_device, ", or send the tensors inline or through a "
      "POSIX shared-memory region"));
}

}  // namespace gdn
