// The cuda backend: the GDN kernels on one GPU, one stream. Host-side header:
// no CUDA includes, so the server compiles without nvcc.
#ifndef GDN_KERNELS_CUDA_CUDA_BACKEND_H_
#define GDN_KERNELS_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace gdn {

// Whether a CUDA device can be used (driver present, at least one device).
bool CudaDeviceAvailable();

// Unavailable when there is no usable device.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device);

}  // namespace gdn

#endif  // GDN_KERNELS_CUDA_CUDA_BACKEND_H_
