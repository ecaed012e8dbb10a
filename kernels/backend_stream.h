// BackendStream: one more ordered queue of work on a backend, so that the
// server's engine keeps several batches in flight at once (staging of batch
// n+1 beside the kernels of batch n; a decode beside a long prefill).
//
// cuda: a CUDA stream of its own (high priority for decode lanes), with an
// event marking the end of the last batch, and its own chunked-prefill
// workspace. cpu: every call runs to completion before it returns, so a
// batch is always done by the time Query() is asked.
//
// Ordering between queues is explicit: the backend's own stream carries the
// state cache's page copies (spill, restore, import), so a batch that reads
// pages calls WaitForBackend() first; a batch that continues a state written
// by a batch on another stream calls WaitFor(that stream) first. Both only
// order the device; the host never blocks in them.
//
// Threading: as Backend (the one thread that owns the backend; streams may
// not be used from two threads at once).
#ifndef GDN_KERNELS_BACKEND_STREAM_H_
#define GDN_KERNELS_BACKEND_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn {

// One copy of a gather: `bytes` from `src` (memory the backend's kernels can
// read: host memory from Backend::AllocateHost, or backend memory) to
// dst_base + dst_offset. 16-byte aligned pointers and sizes take the wide
// path; anything else works too.
struct GatherCopy {
  const void* src = nullptr;
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
};

// Gather copies are at most this long (AppendGatherCopies splits longer
// ranges), so one cuda block copies one item and a long prefill spreads over
// many blocks.
inline constexpr uint64_t kGatherCopyMaxBytes = 64 << 10;

// Appends the copy of [src, src + bytes) to dst_offset, split into items of
// at most kGatherCopyMaxBytes.
inline void AppendGatherCopies(const void* src, uint64_t dst_offset, uint64_t bytes,
                               std::vector<GatherCopy>* out) {
  const char* from = static_cast<const char*>(src);
  for (uint64_t done = 0; done < bytes; done += kGatherCopyMaxBytes) {
    const uint64_t n = bytes - done < kGatherCopyMaxBytes ? bytes - done : kGatherCopyMaxBytes;
    out->push_back({from + done, dst_offset + done, n});
  }
}

class BackendStream {
 public:
  virtual ~BackendStream() = default;

  // As Backend::Decode / Prefill, on this stream.
  virtual absl::Status Decode(const GdnOptions& options, const GdnParams& params) = 0;
  virtual absl::Status Prefill(const GdnOptions& options, const GdnParams& params) = 0;

  // Copies on this stream; host memory must be from Backend::AllocateHost
  // and stay valid until the stream is done (Query / Synchronize).
  virtual absl::Status CopyToDevice(void* dst, const void* src_host, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* dst_host, const void* src, size_t bytes) = 0;

  // Every copy of `items` into dst_base (backend memory) in one operation.
  // `items` is host memory; `items_on_device`, when not null, is the same
  // list already in backend memory earlier on this stream (the caller's
  // metadata upload), which cuda's gather kernel reads.
  virtual absl::Status Gather(void* dst_base, const GatherCopy* items,
                              const GatherCopy* items_on_device, int count) = 0;

  // Work queued on this stream from now on runs after everything queued so
  // far on the backend's own stream / on `other` (up to its last Record()).
  virtual absl::Status WaitForBackend() = 0;
  virtual absl::Status WaitFor(BackendStream& other) = 0;

  // Marks the end of the work queued so far; Query() is true once all of it
  // has finished (an error of the work is returned by Query / Synchronize).
  virtual absl::Status Record() = 0;
  virtual absl::StatusOr<bool> Query() = 0;
  virtual absl::Status Synchronize() = 0;

  // `on_done` runs once the work up to each later Record() has finished, on
  // a thread of the backend's (cuda: the driver's callback thread), so a
  // waiting owner can sleep instead of polling; it may only take a lock and
  // notify. The cpu backend never calls it (its work is done on return).
  virtual void SetOnDone(std::function<void()> on_done) = 0;
};

}  // namespace gdn

#endif  // GDN_KERNELS_BACKEND_STREAM_H_
