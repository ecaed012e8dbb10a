// The kernel of Backend::CheckValues: the first element of each checked
// range that is not finite (or outside [lo, hi]), found on the device so
// tensors in client GPU regions are validated where they lie, without a copy
// to the host. One launch for up to kMaxValueChecks ranges, passed by value
// (no upload); host header.
#ifndef GDN_KERNELS_CUDA_CHECK_VALUES_H_
#define GDN_KERNELS_CUDA_CHECK_VALUES_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/backend.h"

namespace gdn::cuda {

// A call has at most five device tensors to check (q, k, v, g, beta).
constexpr int kMaxValueChecks = 8;

struct ValueCheckBatch {
  ValueCheck checks[kMaxValueChecks];
  int count = 0;
};

// Results without a reset per launch: marks[i] (device memory, one per
// check slot, zero at first) is only ever raised with atomicMax to
//   epoch << kMarkIndexBits | (kMarkIndexMask - first bad index),
// so after a launch with an `epoch` larger than every earlier one, check i
// failed iff MarkEpoch(marks[i]) == epoch, at index MarkIndex(marks[i]).
// Epochs run 1 .. kMaxMarkEpoch; past it, zero the marks and start at 1.
constexpr int kMarkIndexBits = 36;  // 64 Gi elements per range
constexpr uint64_t kMarkIndexMask = (uint64_t{1} << kMarkIndexBits) - 1;
constexpr uint64_t kMaxMarkEpoch = (uint64_t{1} << (64 - kMarkIndexBits)) - 1;
inline uint64_t MarkEpoch(uint64_t mark) { return mark >> kMarkIndexBits; }
inline int64_t MarkIndex(uint64_t mark) {
  return static_cast<int64_t>(kMarkIndexMask - (mark & kMarkIndexMask));
}

// InvalidArgument when a range has kMarkIndexMask elements or more, or
// `batch.count` is outside 1..kMaxValueChecks, or `epoch` outside
// 1..kMaxMarkEpoch. Asynchronous on `stream`.
absl::Status LaunchCheckValues(const ValueCheckBatch& batch, uint64_t epoch,
                               unsigned long long* marks, cudaStream_t stream);

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_CHECK_VALUES_H_
