// CudaBackend's side of same-host memory regions (kernels/backend.h):
// registering shared host memory, opening another process's device memory
// from its IPC handle (on the server's GPU, or on another GPU of the host
// over peer access where the topology allows it: kernels/device_topology.h),
// and checking values where they lie on the device.
// Every method here may run on any thread (the server's request threads).
#include <cuda.h>  // types of cuMemGetAddressRange only (reached through the runtime)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/check_values.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/device_topology.h"

namespace gdn::cuda {
namespace {

// Per calling thread: a stream, the marks of CheckValues (check_values.h:
// never reset, so a call is one launch, one 64-byte download and one wait)
// and their pinned copy, kept for the thread's life (request threads live
// as long as the server; freeing at thread exit could race the CUDA
// runtime's own teardown at process exit).
struct CheckScratch {
  int device = -1;
  cudaStream_t stream = nullptr;
  unsigned long long* device_marks = nullptr;  // [kMaxValueChecks]
  unsigned long long* host_marks = nullptr;    // pinned, [kMaxValueChecks]
  uint64_t epoch = 0;                          // of the last launch

  absl::Status Reserve(int device_id) {
    if (device == device_id) return absl::OkStatus();
    if (device >= 0) return absl::InternalError("CheckValues: one thread, two devices");
    GDN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    GDN_CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&host_marks),
                                            kMaxValueChecks * sizeof(unsigned long long)));
    GDN_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&device_marks),
                                        kMaxValueChecks * sizeof(unsigned long long)));
    GDN_CUDA_RETURN_IF_ERROR(
        cudaMemset(device_marks, 0, kMaxValueChecks * sizeof(unsigned long long)));
    device = device_id;
    return absl::OkStatus();
  }

  // The epoch of the next launch; past the last one the marks start over.
  absl::StatusOr<uint64_t> NextEpoch() {
    if (epoch == kMaxMarkEpoch) {
      GDN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
          device_marks, 0, kMaxValueChecks * sizeof(unsigned long long), stream));
      epoch = 0;
    }
    return ++epoch;
  }
};

thread_local CheckScratch check_scratch;

// The size of the allocation that starts at `base` (the driver's
// cuMemGetAddressRange, looked up through the runtime so that nothing links
// the driver library).
absl::StatusOr<size_t> AllocationBytes(void* base) {
  using GetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static GetAddressRange get_range = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return static_cast<GetAddressRange>(nullptr);
    }
    return reinterpret_cast<GetAddressRange>(fn);
  }();
  if (get_range == nullptr) return absl::InternalError("cuMemGetAddressRange is not available");
  CUdeviceptr start = 0;
  size_t bytes = 0;
  if (get_range(&start, &bytes, reinterpret_cast<CUdeviceptr>(base)) != CUDA_SUCCESS) {
    return absl::InternalError("cuMemGetAddressRange failed on an opened IPC allocation");
  }
  return bytes - (reinterpret_cast<CUdeviceptr>(base) - start);
}

// The devices this process sees and which may access which
// (cudaDeviceCanAccessPeer), read from the driver once: it does not change
// while the process runs.
absl::StatusOr<PeerTopology> HostPeerTopology() {
  static const absl::StatusOr<PeerTopology>* const topology = [] {
    PeerTopology t;
    if (cudaGetDeviceCount(&t.device_count) != cudaSuccess) {
      (void)cudaGetLastError();
      return new absl::StatusOr<PeerTopology>(
          absl::InternalError("cudaGetDeviceCount failed reading the peer topology"));
    }
    const int n = t.device_count;
    t.can_access.assign(static_cast<size_t>(n) * n, false);
    for (int from = 0; from < n; ++from) {
      for (int to = 0; to < n; ++to) {
        int can = 0;
        if (from != to && cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess) {
          (void)cudaGetLastError();
          can = 0;
        }
        t.can_access[static_cast<size_t>(from) * n + to] = can != 0;
      }
    }
    return new absl::StatusOr<PeerTopology>(std::move(t));
  }();
  return *topology;
}

}  // namespace

absl::StatusOr<Backend::HostRegistration> CudaBackend::RegisterHostMemory(void* data,
                                                                          size_t bytes) {
  if (absl::Status s = Activate(); !s.ok()) return s;
  // Portable: every context may use it; mapped: kernels (the gather) read it.
  GDN_CUDA_RETURN_IF_ERROR(
      cudaHostRegister(data, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
  void* device_address = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(&device_address, data, 0); e != cudaSuccess) {
    (void)cudaHostUnregister(data);
    GDN_CUDA_RETURN_IF_ERROR(e);
  }
  const int device = device_;
  std::shared_ptr<void> handle(data, [device](void* p) {
    (void)cudaSetDevice(device);
    (void)cudaHostUnregister(p);
  });
  return HostRegistration{std::move(handle), static_cast<char*>(device_address)};
}

absl::StatusOr<Backend::DeviceMapping> CudaBackend::OpenIpcMemory(absl::string_view ipc_handle,
                                                                 int device) {
  cudaIpcMemHandle_t handle;
  if (ipc_handle.size() != sizeof(handle)) {
    return absl::InvalidArgumentError(absl::StrCat("cuda_ipc_handle: must be ", sizeof(handle),
                                                   " bytes (a cudaIpcMemHandle_t), got ",
                                                   ipc_handle.size()));
  }
  std::memcpy(&handle, ipc_handle.data(), sizeof(handle));
  absl::StatusOr<PeerTopology> topology = HostPeerTopology();
  if (!topology.ok()) return topology.status();
  // The client's device_id, as the server numbers devices: refused at once
  // when the topology already says the server cannot reach it. (A client
  // that sees other devices than the server, CUDA_VISIBLE_DEVICES, may
  // number them otherwise; the handle's own device decides below.)
  if (device >= 0 && device < topology->device_count) {
    if (absl::StatusOr<RegionAccess> a = DecideRegionAccess(device_, device, *topology); !a.ok()) {
      return a.status();
    }
  }
  if (absl::Status s = Activate(); !s.ok()) return s;
  void* base = nullptr;
  // Lazy peer access: memory of another GPU of this host is mapped for this
  // server's device over NVLink / PCIe (peer access enabled on first use).
  const cudaError_t e = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky; clear it for this thread
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda_ipc_handle: cudaIpcOpenMemHandle failed on the server's device ", device_,
        " for a region on device ", device, ": ", cudaGetErrorName(e), ": ",
        cudaGetErrorString(e), " (a handle from cudaIpcGetMemHandle of a live allocation in "
        "another process on this host, on the server's GPU or a peer of it that the server "
        "sees: CUDA_VISIBLE_DEVICES)"));
  }
  const int dev = device_;
  std::shared_ptr<void> mapping(base, [dev](void* p) {
    (void)cudaSetDevice(dev);
    (void)cudaIpcCloseMemHandle(p);
  });
  // Where the memory really lies, in this process's numbering: the one the
  // peer decision must hold for (dropping `mapping` closes the handle).
  cudaPointerAttributes attributes;
  GDN_CUDA_RETURN_IF_ERROR(cudaPointerGetAttributes(&attributes, base));
  if (absl::StatusOr<RegionAccess> a = DecideRegionAccess(device_, attributes.device, *topology);
      !a.ok()) {
    return a.status();
  }
  absl::StatusOr<size_t> bytes = AllocationBytes(base);
  if (!bytes.ok()) return bytes.status();
  return DeviceMapping{std::move(mapping), static_cast<char*>(base), *bytes};
}

absl::StatusOr<std::vector<int64_t>> CudaBackend::CheckValues(
    const std::vector<ValueCheck>& checks) {
  std::vector<int64_t> first_bad(checks.size());
  if (checks.empty()) return first_bad;
  if (absl::Status s = Activate(); !s.ok()) return s;
  CheckScratch& scratch = check_scratch;
  if (absl::Status s = scratch.Reserve(device_); !s.ok()) return s;
  cudaStream_t stream = scratch.stream;
  for (size_t done = 0; done < checks.size(); done += kMaxValueChecks) {
    ValueCheckBatch batch;
    batch.count = static_cast<int>(std::min<size_t>(kMaxValueChecks, checks.size() - done));
    std::copy_n(checks.begin() + done, batch.count, batch.checks);
    absl::StatusOr<uint64_t> epoch = scratch.NextEpoch();
    if (!epoch.ok()) return epoch.status();
    if (absl::Status s = LaunchCheckValues(batch, *epoch, scratch.device_marks, stream); !s.ok()) {
      return s;
    }
    GDN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(scratch.host_marks, scratch.device_marks,
                                             batch.count * sizeof(unsigned long long),
                                             cudaMemcpyDeviceToHost, stream));
    GDN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    for (int i = 0; i < batch.count; ++i) {
      const uint64_t mark = scratch.host_marks[i];
      first_bad[done + i] = MarkEpoch(mark) == *epoch ? MarkIndex(mark) : checks[done + i].count;
    }
  }
  return first_bad;
}

}  // namespace gdn::cuda
