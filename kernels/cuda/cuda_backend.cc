// The cuda backend: memory on one device, every call ordered on one stream
// it creates, the GDN kernels launched through kernels/cuda/recurrent_*.
#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_stream.h"
#include "kernels/device_topology.h"
#include "kernels/cuda/recurrent_params.h"

namespace gdn {

bool CudaDeviceAvailable() {
  // cudaGetDeviceCount fails quietly (no output, no abort) without a driver
  // or a device; the sticky error it may leave is cleared.
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return absl::UnavailableError(absl::StrCat(
        "no usable CUDA device: ",
        error != cudaSuccess ? cudaGetErrorString(error) : "device count is 0"));
  }
  if (absl::Status s = ValidateDeviceIndex(device, count); !s.ok()) return s;
  GDN_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaDeviceProp prop;
  GDN_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  cudaStream_t stream = nullptr;
  GDN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::string description =
      absl::StrCat(prop.name, " (device ", device, ", sm_", prop.major, prop.minor, ", ",
                   prop.multiProcessorCount, " SMs, ", prop.totalGlobalMem >> 20, " MiB)");
  return std::unique_ptr<Backend>(
      std::make_unique<cuda::CudaBackend>(device, stream, std::move(description)));
}

namespace cuda {

CudaBackend::CudaBackend(int device, cudaStream_t stream, std::string description)
    : device_(device), stream_(stream), description_(std::move(description)) {}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) {
    (void)cudaSetDevice(device_);
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
}

absl::Status CudaBackend::Activate() const {
  int current = -1;
  GDN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
  if (current != device_) GDN_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  return absl::OkStatus();
}

absl::Status CudaBackend::Supports(const GdnOptions& options) const {
  // The recurrent kernels cover everything ValidateOptions accepts: K and V
  // of 64 / 128, fp32 / bf16 / fp16 inputs, fp32 / bf16 state, both gating
  // modes, L2 norm on or off, any Hv multiple of Hqk; int8 / fp8 states with
  // bf16 or fp32 inputs (recurrent_instances_q8_*.cu).
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  if (IsQuantizedState(options.state_dtype) && options.input_dtype == DType::kF16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda backend: ", StateDTypeName(options.state_dtype),
        " states take bf16 or fp32 activations (fp16 is not compiled)"));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Decode(const GdnOptions& options, const GdnParams& params) {
  if (absl::Status s = ValidateParams(options, params, kMaxDecodeTokens); !s.ok()) return s;
  if (absl::Status s = Activate(); !s.ok()) return s;
  ++main_stream_work_;
  return LaunchRecurrent(options, MakeRecurrentParams(options, params), stream_);
}

absl::Status CudaBackend::Prefill(const GdnOptions& options, const GdnParams& params) {
  if (absl::Status s = ValidateParams(options, params, /*max_tokens_per_seq=*/0); !s.ok()) {
    return s;
  }
  if (absl::Status s = Activate(); !s.ok()) return s;
  ++main_stream_work_;
  return RoutePrefill(options, params);
}

absl::Status CudaBackend::RoutePrefill(const GdnOptions& options, const GdnParams& params) {
  return LaunchPrefill(options, params, stream_, chunked_prefill_, prefill_kernel_);
}

bool PrefersChunkedPrefill(const GdnOptions& options, const GdnParams& params) {
  // Chunked tensor-core prefill (kernels/cuda/chunked_prefill.h): faster
  // than the recurrent kernel from ~64 tokens per sequence on the H200
  // (16/32 heads, 8 sequences: 0.104 vs 0.145 ms at 64 tokens, 0.097 vs
  // 0.055 at 16; bench/results/2026-12-01-prefill-v7.md).
  const bool half_inputs =
      options.input_dtype == DType::kBF16 || options.input_dtype == DType::kF16;
  return half_inputs &&
         params.total_tokens >=
             int64_t{kChunkedPrefillMinTokensPerSeq} * params.num_seqs &&
         ChunkedPrefill::Supports(options).ok();
}

absl::Status LaunchPrefill(const GdnOptions& options, const GdnParams& params,
                           cudaStream_t stream, ChunkedPrefill& chunked,
                           PrefillKernel kernel) {
  const bool use_chunked = kernel == PrefillKernel::kChunked ||
                           (kernel == PrefillKernel::kAuto &&
                            PrefersChunkedPrefill(options, params));
  if (use_chunked) return chunked.Run(options, params, stream);
  return LaunchRecurrent(options, MakeRecurrentParams(options, params), stream);
}

absl::StatusOr<void*> CudaBackend::Allocate(size_t bytes) {
  if (absl::Status s = Activate(); !s.ok()) return s;
  void* ptr = nullptr;
  GDN_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, bytes == 0 ? 1 : bytes));  // 256-byte aligned
  return ptr;
}

void CudaBackend::Free(void* ptr) {
  if (ptr == nullptr) return;
  (void)Activate();
  // Work queued on the stream may still use the memory.
  (void)cudaStreamSynchronize(stream_);
  (void)cudaFree(ptr);
}

absl::StatusOr<void*> CudaBackend::AllocateHost(size_t bytes) {
  if (absl::Status s = Activate(); !s.ok()) return s;
  void* ptr = nullptr;
  // Portable: usable whichever thread (and context) allocated it - the
  // server's request threads do.
  GDN_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&ptr, bytes == 0 ? 1 : bytes, cudaHostAllocPortable));
  return ptr;
}

void CudaBackend::FreeHost(void* ptr) {
  if (ptr == nullptr) return;
  (void)cudaStreamSynchronize(stream_);
  (void)cudaFreeHost(ptr);
}

absl::Status CudaBackend::CopyToDevice(void* dst, const void* src_host, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = Activate(); !s.ok()) return s;
  ++main_stream_work_;
  GDN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::CopyToHost(void* dst_host, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = Activate(); !s.ok()) return s;
  ++main_stream_work_;
  GDN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::CopyOnDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = Activate(); !s.ok()) return s;
  ++main_stream_work_;
  GDN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::Synchronize() {
  if (absl::Status s = Activate(); !s.ok()) return s;
  GDN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BackendStream>> CudaBackend::CreateStream(bool high_priority) {
  return CreateCudaStream(this, high_priority);
}

DeviceMemoryInfo CudaBackend::MemoryInfo() const {
  DeviceMemoryInfo info;
  size_t free_bytes = 0, total_bytes = 0;
  if (Activate().ok() && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    info.total_bytes = total_bytes;
    info.used_bytes = total_bytes - free_bytes;
  }
  return info;
}

}  // namespace cuda
}  // namespace gdn
