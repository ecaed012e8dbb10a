// The cuda BackendStream (kernels/backend_stream.h): a CUDA stream of its
// own on the backend's device, an event after its last Record(), and its own
// chunked-prefill launcher (the workspace is per stream). Created through
// Backend::CreateStream. Host header.
#ifndef GDN_KERNELS_CUDA_CUDA_STREAM_H_
#define GDN_KERNELS_CUDA_CUDA_STREAM_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend_stream.h"

namespace gdn::cuda {

class CudaBackend;

absl::StatusOr<std::unique_ptr<BackendStream>> CreateCudaStream(CudaBackend* backend,
                                                                bool high_priority);

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_CUDA_STREAM_H_
