// The kernel of Backend::CheckValues: the first element of each checked
// range that is not finite (or outside [lo, hi]), found on the device so
// tensors in client GPU regions are validated where they lie, without a copy
// to the host. One launch for all ranges of a call; host header.
#ifndef GDN_KERNELS_CUDA_CHECK_VALUES_H_
#define GDN_KERNELS_CUDA_CHECK_VALUES_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/backend.h"

namespace gdn::cuda {

// `checks` and `first_bad` are device memory, `count` entries each;
// first_bad[i] must hold checks[i].count (or more) before the launch and
// ends as the smallest failing index. `max_elements`: the largest
// checks[i].count (sizes the grid). Asynchronous on `stream`.
absl::Status LaunchCheckValues(const ValueCheck* checks, unsigned long long* first_bad,
                               int count, int64_t max_elements, cudaStream_t stream);

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_CHECK_VALUES_H_
