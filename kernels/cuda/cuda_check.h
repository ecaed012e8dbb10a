// Checking CUDA runtime calls: every call's cudaError_t becomes an
// absl::Status naming the call, the file:line and CUDA's own error string.
//
//   GDN_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, bytes));
//   GDN_CUDA_RETURN_IF_ERROR(cudaGetLastError());   // after a launch
#ifndef GDN_KERNELS_CUDA_CUDA_CHECK_H_
#define GDN_KERNELS_CUDA_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gdn {

// OK for cudaSuccess; otherwise Internal (Unavailable for "no device" /
// "no driver" / "insufficient driver", ResourceExhausted for out of memory)
// with "<what> at <file>:<line>: <cudaGetErrorName>: <cudaGetErrorString>".
inline absl::Status CudaStatus(cudaError_t error, const char* what,
                               const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message =
      absl::StrCat(what, " at ", file, ":", line, ": ",
                   cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
      return absl::UnavailableError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace gdn

#define GDN_CUDA_RETURN_IF_ERROR(call)                                   \
  do {                                                                   \
    const cudaError_t gdn_cuda_error_ = (call);                          \
    if (gdn_cuda_error_ != cudaSuccess) {                                \
      return ::gdn::CudaStatus(gdn_cuda_error_, #call, __FILE__, __LINE__); \
    }                                                                    \
  } while (0)

#endif  // GDN_KERNELS_CUDA_CUDA_CHECK_H_
