// The cuda Backend class itself, for code beside it that needs its stream
// (its streams, benchmarks). Everyone else uses cuda_backend.h and the
// Backend interface. Includes the CUDA runtime API header.
//
// Threading: as Backend (one owning thread at a time; which thread may
// change - the server's engine is held by its own thread or by a request
// thread - so every call makes the device current first).
#ifndef GDN_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_
#define GDN_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/backend.h"
#include "kernels/cuda/chunked_prefill.h"

namespace gdn::cuda {

// Which prefill kernel runs: kAuto is the routing policy of
// CudaBackend::RoutePrefill (PrefersChunkedPrefill); the others force one
// (tests of the recurrent kernel, benchmarks, kernels/capi's
// gdn_prefill_variant).
enum class PrefillKernel { kAuto = 0, kRecurrent = 1, kChunked = 2 };

// The policy itself: whether kAuto picks the chunked kernel for this call:
// bf16 or fp16 inputs (tensor-core operands of the input's own type, the
// accuracy of flash-linear-attention's chunked kernel) whose sequences
// average at least kChunkedPrefillMinTokensPerSeq tokens. fp32 inputs stay
// on the recurrent kernel (fp32 arithmetic throughout).
inline constexpr int kChunkedPrefillMinTokensPerSeq = 64;
bool PrefersChunkedPrefill(const GdnOptions& options, const GdnParams& params);

// Prefill on `stream` through the routing policy, for callers without a
// backend (kernels/capi): `chunked` is the launcher (and workspace) used
// when the chunked kernel runs, owned by the caller, one per stream. Params
// must already be validated (ValidateParams).
absl::Status LaunchPrefill(const GdnOptions& options, const GdnParams& params,
                           cudaStream_t stream, ChunkedPrefill& chunked,
                           PrefillKernel kernel = PrefillKernel::kAuto);

class CudaBackend final : public Backend {
 public:
  // Use CreateCudaBackend(); this constructor takes ownership of `stream`.
  CudaBackend(int device, cudaStream_t stream, std::string description);
  ~CudaBackend() override;

  absl::string_view name() const override { return "cuda"; }
  std::string device_description() const override { return description_; }
  absl::Status Supports(const GdnOptions& options) const override;

  absl::Status Decode(const GdnOptions& options, const GdnParams& params) override;
  absl::Status Prefill(const GdnOptions& options, const GdnParams& params) override;

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  absl::StatusOr<void*> AllocateHost(size_t bytes) override;
  void FreeHost(void* ptr) override;

  absl::Status CopyToDevice(void* dst, const void* src_host, size_t bytes) override;
  absl::Status CopyToHost(void* dst_host, const void* src, size_t bytes) override;
  absl::Status CopyOnDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status Synchronize() override;

  DeviceMemoryInfo MemoryInfo() const override;

  absl::StatusOr<std::unique_ptr<BackendStream>> CreateStream(bool high_priority) override;

  // Same-host regions (cuda_regions.cc); any thread.
  absl::StatusOr<HostRegistration> RegisterHostMemory(void* data, size_t bytes) override;
  absl::StatusOr<DeviceMapping> OpenIpcMemory(absl::string_view ipc_handle,
                                              int device) override;
  absl::StatusOr<std::vector<int64_t>> CheckValues(const std::vector<ValueCheck>& checks) override;

  int device() const { return device_; }
  // Work items queued on stream() so far (kernels and copies): a
  // BackendStream waits for the backend's stream only when this moved.
  uint64_t main_stream_work() const { return main_stream_work_; }
  PrefillKernel prefill_kernel() const { return prefill_kernel_; }
  // The one stream every call of this backend is ordered on.
  cudaStream_t stream() const { return stream_; }
  // The prefill kernel of the following Prefill calls (kAuto by default).
  void set_prefill_kernel(PrefillKernel kernel) { prefill_kernel_ = kernel; }

 private:
  // Makes device_ current on the calling thread (cheap when it already is).
  absl::Status Activate() const;
  // The one place prefill picks its kernel (see the comment inside).
  absl::Status RoutePrefill(const GdnOptions& options, const GdnParams& params);

  int device_;
  cudaStream_t stream_;
  std::string description_;
  ChunkedPrefill chunked_prefill_;  // owns the chunked prefill's workspace
  PrefillKernel prefill_kernel_ = PrefillKernel::kAuto;
  uint64_t main_stream_work_ = 0;
};

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_
