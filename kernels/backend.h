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
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/backend_stream.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn {

struct DeviceMemoryInfo {
  size_t used_bytes = 0;
  size_t total_bytes = 0;
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
  // also read it directly, which BackendStream::Gather relies on). Safe from
  // any thread.
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
