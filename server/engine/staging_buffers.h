// Host staging (Backend::AllocateHost: pinned for cuda) and backend-memory
// buffers for one kernel call's inputs and outputs. Buffers grow
// geometrically (x2) when a batch needs more and are never shrunk or
// reallocated per call. Owned and used by the engine thread only.
//
// Double buffering: the engine keeps one StagingBuffers per phase (decode,
// prefill). Overlapping the next batch's uploads with this batch's compute
// needs a second set per phase and a stream per set; the layout here (one
// object per in-flight batch) is meant to allow exactly that.
#ifndef GDN_SERVER_ENGINE_STAGING_BUFFERS_H_
#define GDN_SERVER_ENGINE_STAGING_BUFFERS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/backend.h"

namespace gdn {

// One named buffer: a host copy and a backend copy of the same capacity.
struct StagedBuffer {
  void* host = nullptr;
  void* device = nullptr;
  size_t capacity = 0;
};

class StagingBuffers {
 public:
  enum Slot {
    kQ = 0,        // [T, Hqk, K] activation dtype
    kK,            // [T, Hqk, K]
    kV,            // [T, Hv, V]
    kO,            // [T, Hv, V] (written by the kernel)
    kG,            // [T, Hv] fp32
    kBeta,         // [T, Hv] fp32
    kCuSeqlens,    // [N + 1] int32
    kInitialPages, // [N] int32
    kFinalPages,   // [N] int32
    kNumSlots
  };

  explicit StagingBuffers(Backend* backend) : backend_(backend) {}
  ~StagingBuffers();
  StagingBuffers(const StagingBuffers&) = delete;
  StagingBuffers& operator=(const StagingBuffers&) = delete;

  // Makes `slot` hold at least `bytes` (growing to max(bytes, 2 * capacity)).
  absl::Status Reserve(Slot slot, size_t bytes);
  const StagedBuffer& get(Slot slot) const { return buffers_[slot]; }

  // Host -> backend copy of the first `bytes` of `slot` (ordered on the
  // backend's stream).
  absl::Status Upload(Slot slot, size_t bytes);
  // Backend -> host copy of the first `bytes` of `slot`.
  absl::Status Download(Slot slot, size_t bytes);

 private:
  void Release(StagedBuffer& buffer);

  Backend* backend_;
  StagedBuffer buffers_[kNumSlots];
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_STAGING_BUFFERS_H_
