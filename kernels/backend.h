// The one interface every kernel backend implements: the two operator entry
// points plus the memory operations the state cache and the server need
// (pool allocation, staging, page copies between tiers).
//
// Threading: a Backend is owned and used by one thread (the server's engine
// thread). Calls are ordered on that backend's stream; Synchronize() waits for
// all of them. Nothing here is safe to call from two threads at once, except
// AllocateHost / FreeHost, which any thread may call (the server's request
// threads take their I/O buffers from it).
#ifndef GDN_KERNELS_BACKEND_H_
#define GDN_KERNELS_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/backend_stream.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn {

struct DeviceMemoryInfo {
  size_t used_bytes = 0;
  size_t total_bytes = 0;
};

// One range of backend memory to check (Backend::CheckValues): `count`
// elements of `dtype` at `data`; with `range`, also lo <= x <= hi.
struct ValueCheck {
  const void* data = nullptr;
  int64_t count = 0;
  DType dtype = DType::kF32;
  bool range = false;
  float lo = 0.0f, hi = 0.0f;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual absl::string_view name() const = 0;
  // Human-readable device description, e.g. "NVIDIA H200 (sm_90, 132 SMs)".
  virtual std::string device_description() const = 0;

  // Whether this backend supports the options (shape, dtypes, gating). The
  // server checks once at start; kernels check again per call.
  virtual absl::Status Supports(const GdnOptions& options) const = 0;

  // Every sequence brings 1..kMaxDecodeTokens tokens. Asynchronous on the
  // backend's stream for cuda; returns after the work for cpu.
  virtual absl::Status Decode(const GdnOptions& options,
                              const GdnParams& params) = 0;
  // Packed variable-length sequences, any length >= 1.
  virtual absl::Status Prefill(const GdnOptions& options,
                               const GdnParams& params) = 0;

  // Backend memory ("device" memory: host memory for cpu). Allocations are
  // aligned to at least 256 bytes.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  // Host memory suited for fast transfers (pinned for cuda; the device can
  // also read and write it directly, which BackendStream::Gather and the
  // engine's zero-copy decode rely on: kernels given pointers into it). Safe
  // from any thread.
  virtual absl::StatusOr<void*> AllocateHost(size_t bytes) = 0;
  virtual void FreeHost(void* ptr) = 0;

  // Another ordered queue of work on this backend (backend_stream.h).
  // high_priority: scheduled ahead of other streams' work where the device
  // can (decode beside prefill). Unimplemented for backends without streams.
  virtual absl::StatusOr<std::unique_ptr<BackendStream>> CreateStream(bool high_priority) {
    return absl::UnimplementedError("this backend has no streams");
  }

  // Copies, ordered on the backend's stream. Host pointers must stay valid
  // until Synchronize() returns.
  virtual absl::Status CopyToDevice(void* dst, const void* src_host,
                                    size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* dst_host, const void* src,
                                  size_t bytes) = 0;
  virtual absl::Status CopyOnDevice(void* dst, const void* src,
                                    size_t bytes) = 0;
  virtual absl::Status Synchronize() = 0;

  virtual DeviceMemoryInfo MemoryInfo() const = 0;

  // Same-host memory regions (server/regions/). Safe from any thread.
  //
  // Host memory another process shares with this one (a mapped POSIX shm
  // object): made addressable by this backend's copies and kernels until
  // the returned handle is released; the pointer to give them is returned
  // beside it (cuda: page-locked and mapped, so copies are DMA and kernels
  // read it over the bus; cpu: the memory itself).
  struct HostRegistration {
    std::shared_ptr<void> handle;
    char* device_address = nullptr;
  };
  virtual absl::StatusOr<HostRegistration> RegisterHostMemory(void* data, size_t bytes) {
    return HostRegistration{nullptr, static_cast<char*>(data)};
  }
  // Device memory of another process named by a CUDA IPC handle (the 64
  // bytes of a cudaIpcMemHandle_t) on `device`: the allocation's base and
  // size here, mapped while `handle` is held. FailedPrecondition on
  // backends without CUDA; InvalidArgument for a handle that does not open.
  struct DeviceMapping {
    std::shared_ptr<void> handle;
    char* base = nullptr;
    size_t bytes = 0;
  };
  virtual absl::StatusOr<DeviceMapping> OpenIpcMemory(absl::string_view ipc_handle, int device) {
    return absl::FailedPreconditionError(
        absl::StrCat("backend ", name(), " cannot open CUDA IPC memory; run gdn-server "
                     "--backend=cuda on the GPU the region lives on"));
  }
  // For each check, the index of its first element that is not finite (or
  // outside [lo, hi]), or its count when every element passes. For backend
  // memory the host cannot read (device regions); synchronous.
  virtual absl::StatusOr<std::vector<int64_t>> CheckValues(const std::vector<ValueCheck>& checks) {
    return absl::UnimplementedError(absl::StrCat("backend ", name(), " has no value checks"));
  }
};

// Which backend to create.
enum class BackendKind { kAuto, kCpu, kCuda };
bool ParseBackendKind(absl::string_view name, BackendKind* out);

struct BackendConfig {
  BackendKind kind = BackendKind::kAuto;
  int cpu_threads = 0;  // 0: one per hardware thread
  int cuda_device = 0;
};

// kAuto takes cuda when it was built and a device is present, else cpu.
// kCuda without a usable device is FailedPrecondition / Unavailable.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    const BackendConfig& config);

// Whether this binary was built with the cuda backend.
bool CudaBackendBuilt();

}  // namespace gdn

#endif  // GDN_KERNELS_BACKEND_H_
