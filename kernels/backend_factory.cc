// CreateBackend: the one place that picks a backend at run time.
#include <memory>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/device_topology.h"
#ifdef GDN_HAVE_CUDA_BACKEND
#include "kernels/cuda/cuda_backend.h"
#endif

namespace gdn {

bool ParseBackendKind(absl::string_view name, BackendKind* out) {
  if (name == "auto") *out = BackendKind::kAuto;
  else if (name == "cpu") *out = BackendKind::kCpu;
  else if (name == "cuda") *out = BackendKind::kCuda;
  else return false;
  return true;
}

bool CudaBackendBuilt() {
#ifdef GDN_HAVE_CUDA_BACKEND
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    const BackendConfig& config) {
  if (config.kind == BackendKind::kCpu) {
    return CreateCpuBackend(config.cpu_threads);
  }
#ifdef GDN_HAVE_CUDA_BACKEND
  if (config.kind == BackendKind::kCuda || CudaDeviceAvailable()) {
    return CreateCudaBackend(config.cuda_device);
  }
  // auto without a device: a device picked explicitly is not dropped for
  // the cpu without a word.
  if (config.cuda_device != 0) return ValidateDeviceIndex(config.cuda_device, 0);
#else
  if (config.kind == BackendKind::kAuto && config.cuda_device != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device=", config.cuda_device, " but this binary was built without CUDA"));
  }
  if (config.kind == BackendKind::kCuda) {
    return absl::FailedPreconditionError(
        "backend=cuda requested but this binary was built without CUDA "
        "(configure with -DGDN_WITH_CUDA=ON where nvcc exists)");
  }
#endif
  return CreateCpuBackend(config.cpu_threads);
}

}  // namespace gdn
