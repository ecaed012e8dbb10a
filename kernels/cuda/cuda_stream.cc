#include "kernels/cuda/cuda_stream.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/cuda/chunked_prefill.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gather.h"
#include "kernels/cuda/recurrent_params.h"

namespace gdn::cuda {
namespace {

// A gather of this many items or fewer goes as plain copies (one for the
// usual batch of one call: its whole input block); more take the kernel.
constexpr int kMaxGatherCopies = 2;

class CudaStream final : public BackendStream {
 public:
  CudaStream(CudaBackend* backend, cudaStream_t stream, cudaEvent_t done,
             cudaEvent_t backend_mark)
      : backend_(backend), stream_(stream), done_(done), backend_mark_(backend_mark) {}

  ~CudaStream() override {
    (void)cudaSetDevice(backend_->device());
    (void)cudaStreamSynchronize(stream_);
    (void)cudaEventDestroy(done_);
    (void)cudaEventDestroy(backend_mark_);
    (void)cudaStreamDestroy(stream_);
  }

  absl::Status Decode(const GdnOptions& options, const GdnParams& params) override {
    if (absl::Status s = ValidateParams(options, params, kMaxDecodeTokens); !s.ok()) return s;
    if (absl::Status s = Activate(); !s.ok()) return s;
    return LaunchRecurrent(options, MakeRecurrentParams(options, params), stream_);
  }

  absl::Status Prefill(const GdnOptions& options, const GdnParams& params) override {
    if (absl::Status s = ValidateParams(options, params, 0); !s.ok()) return s;
    if (absl::Status s = Activate(); !s.ok()) return s;
    return LaunchPrefill(options, params, stream_, chunked_, backend_->prefill_kernel());
  }

  absl::Status CopyToDevice(void* dst, const void* src_host, size_t bytes) override {
    return Copy(dst, src_host, bytes, cudaMemcpyHostToDevice);
  }
  absl::Status CopyToHost(void* dst_host, const void* src, size_t bytes) override {
    return Copy(dst_host, src, bytes, cudaMemcpyDeviceToHost);
  }

  absl::Status Gather(void* dst_base, const GatherCopy* items, const GatherCopy* items_on_device,
                      int count) override {
    if (count > kMaxGatherCopies && items_on_device != nullptr) {
      if (absl::Status s = Activate(); !s.ok()) return s;
      return LaunchGather(dst_base, items_on_device, count, stream_);
    }
    char* dst = static_cast<char*>(dst_base);
    for (int i = 0; i < count; ++i) {
      // cudaMemcpyDefault: the source may be host or device memory (UVA).
      if (absl::Status s = Copy(dst + items[i].dst_offset, items[i].src, items[i].bytes,
                                cudaMemcpyDefault);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status WaitForBackend() override {
    // Only when the backend's stream took work since the last wait.
    const uint64_t work = backend_->main_stream_work();
    if (work == waited_backend_work_) return absl::OkStatus();
    if (absl::Status s = Activate(); !s.ok()) return s;
    GDN_CUDA_RETURN_IF_ERROR(cudaEventRecord(backend_mark_, backend_->stream()));
    GDN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, backend_mark_, 0));
    waited_backend_work_ = work;
    return absl::OkStatus();
  }

  absl::Status WaitFor(BackendStream& other) override {
    auto& o = static_cast<CudaStream&>(other);
    if (&o == this) return absl::OkStatus();
    GDN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, o.done_, 0));
    return absl::OkStatus();
  }

  absl::Status Record() override {
    GDN_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_, stream_));
    if (on_done_) GDN_CUDA_RETURN_IF_ERROR(cudaLaunchHostFunc(stream_, &RunOnDone, this));
    return absl::OkStatus();
  }

  void SetOnDone(std::function<void()> on_done) override { on_done_ = std::move(on_done); }

  absl::StatusOr<bool> Query() override {
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) return false;
    GDN_CUDA_RETURN_IF_ERROR(e);
    return false;
  }

  absl::Status Synchronize() override {
    GDN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

 private:
  static void RunOnDone(void* self) { static_cast<CudaStream*>(self)->on_done_(); }

  absl::Status Activate() const {
    int current = -1;
    GDN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
    if (current != backend_->device()) GDN_CUDA_RETURN_IF_ERROR(cudaSetDevice(backend_->device()));
    return absl::OkStatus();
  }

  absl::Status Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return absl::OkStatus();
    // Any thread may hold the engine (a request thread runs a lone call).
    if (absl::Status s = Activate(); !s.ok()) return s;
    GDN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
    return absl::OkStatus();
  }

  CudaBackend* backend_;
  cudaStream_t stream_;
  cudaEvent_t done_;          // after the last Record()
  cudaEvent_t backend_mark_;  // on the backend's stream, for WaitForBackend
  uint64_t waited_backend_work_ = 0;
  ChunkedPrefill chunked_;    // this stream's prefill workspace
  std::function<void()> on_done_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BackendStream>> CreateCudaStream(CudaBackend* backend,
                                                                bool high_priority) {
  GDN_CUDA_RETURN_IF_ERROR(cudaSetDevice(backend->device()));
  int least = 0, greatest = 0;
  GDN_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t stream = nullptr;
  GDN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithPriority(
      &stream, cudaStreamNonBlocking, high_priority ? greatest : least));
  cudaEvent_t done = nullptr, mark = nullptr;
  GDN_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  GDN_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&mark, cudaEventDisableTiming));
  // Query() before any Record(): a fresh event counts as complete.
  return std::unique_ptr<BackendStream>(std::make_unique<CudaStream>(backend, stream, done, mark));
}

}  // namespace gdn::cuda
