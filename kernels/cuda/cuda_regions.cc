// CudaBackend's side of same-host memory regions (kernels/backend.h):
// registering shared host memory, opening another process's device memory
// from its IPC handle, and checking values where they lie on the device.
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
  if (device != device_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device_id: this server runs on device ", device_, "; the region is on device ", device,
        " (regions must live on the server's GPU)"));
  }
  std::memcpy(&handle, ipc_handle.data(), sizeof(handle));
  if (absl::Status s = Activate(); !s.ok()) return s;
  void* base = nullptr;
  const cudaError_t e = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky; clear it for this thread
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda_ipc_handle: cudaIpcOpenMemHandle failed: ", cudaGetErrorName(e), ": ",
        cudaGetErrorString(e), " (a handle from cudaIpcGetMemHandle of a live allocation in "
        "another process on this host and GPU)"));
  }
  const int dev = device_;
  std::shared_ptr<void> mapping(base, [dev](void* p) {
    (void)cudaSetDevice(dev);
    (void)cudaIpcCloseMemHandle(p);
  });
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
