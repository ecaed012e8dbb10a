// The gather kernel of BackendStream::Gather (kernels/backend_stream.h): one
// block per GatherCopy, each copying its bytes (<= kGatherCopyMaxBytes) from
// wherever the device can read them - pinned host memory through the bus, or
// device memory - into one device buffer. It lets the engine assemble a
// batch from many calls' input blocks with one launch instead of one copy
// per call and tensor. Host header.
#ifndef GDN_KERNELS_CUDA_GATHER_H_
#define GDN_KERNELS_CUDA_GATHER_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "kernels/backend_stream.h"

namespace gdn::cuda {

// `items` is device memory (count entries); asynchronous on `stream`.
absl::Status LaunchGather(void* dst_base, const GatherCopy* items, int count,
                          cudaStream_t stream);

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_GATHER_H_
