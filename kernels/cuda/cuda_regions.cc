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

// Per calling thread: a stream and the buffers of CheckValues, grown as
// needed and kept for the thread's life (request threads live as long as
// the server; freeing at thread exit could race the CUDA runtime's own
// teardown at process exit).
struct CheckScratch {
  int device = -1;
  cudaStream_t stream = nullptr;
  int capacity = 0;
  ValueCheck* host_checks = nullptr;      // pinned, [capacity]
  ValueCheck* device_checks = nullptr;    // [capacity]
  unsigned long long* host_bad = nullptr; // pinned, [capacity]
  unsigned long long* device_bad = nullptr;

  absl::Status Reserve(int device_id, int count) {
    if (device != device_id) {
      if (device >= 0) return absl::InternalError("CheckValues: one thread, two devices");
      device = device_id;
      GDN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    }
    if (count <= capacity) return absl::OkStatus();
    const int n = count < 8 ? 8 : count;
    for (void* p : {static_cast<void*>(host_checks), static_cast<void*>(host_bad)}) {
      if (p != nullptr) (void)cudaFreeHost(p);
    }
    for (void* p : {static_cast<void*>(device_checks), static_cast<void*>(device_bad)}) {
      if (p != nullptr) (void)cudaFree(p);
    }
    capacity = 0;
    GDN_CUDA_RETURN_IF_ERROR(
        cudaMallocHost(reinterpret_cast<void**>(&host_checks), n * sizeof(ValueCheck)));
    GDN_CUDA_RETURN_IF_ERROR(
        cudaMallocHost(reinterpret_cast<void**>(&host_bad), n * sizeof(unsigned long long)));
    GDN_CUDA_RETURN_IF_ERROR(
        cudaMalloc(reinterpret_cast<void**>(&device_checks), n * sizeof(ValueCheck)));
    GDN_CUDA_RETURN_IF_ERROR(
        cudaMalloc(reinterpret_cast<void**>(&device_bad), n * sizeof(unsigned long long)));
    capacity = n;
    return absl::OkStatus();
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
  const int n = static_cast<int>(checks.size());
  if (absl::Status s = scratch.Reserve(device_, n); !s.ok()) return s;
  int64_t max_elements = 0;
  for (int i = 0; i < n; ++i) {
    max_elements = std::max(max_elements, checks[i].count);
    scratch.host_checks[i] = checks[i];
    scratch.host_bad[i] = static_cast<unsigned long long>(checks[i].count);
  }
  cudaStream_t stream = scratch.stream;
  GDN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(scratch.device_checks, scratch.host_checks,
                                           n * sizeof(ValueCheck), cudaMemcpyHostToDevice,
                                           stream));
  GDN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(scratch.device_bad, scratch.host_bad,
                                           n * sizeof(unsigned long long),
                                           cudaMemcpyHostToDevice, stream));
  if (absl::Status s = LaunchCheckValues(scratch.device_checks, scratch.device_bad, n, max_elements,
                                          stream);
      !s.ok()) {
    return s;
  }
  GDN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(scratch.host_bad, scratch.device_bad,
                                           n * sizeof(unsigned long long),
                                           cudaMemcpyDeviceToHost, stream));
  GDN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  for (int i = 0; i < n; ++i) first_bad[i] = static_cast<int64_t>(scratch.host_bad[i]);
  return first_bad;
}

}  // namespace gdn::cuda
