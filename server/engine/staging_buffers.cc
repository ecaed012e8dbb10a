#include "server/engine/staging_buffers.h"

#include <algorithm>

namespace gdn {

StagingBuffers::~StagingBuffers() {
  for (StagedBuffer& b : buffers_) Release(b);
}

void StagingBuffers::Release(StagedBuffer& b) {
  if (b.host != nullptr) backend_->FreeHost(b.host);
  if (b.device != nullptr) backend_->Free(b.device);
  b = StagedBuffer{};
}

absl::Status StagingBuffers::Reserve(Slot slot, size_t bytes) {
  StagedBuffer& b = buffers_[slot];
  if (bytes <= b.capacity) return absl::OkStatus();
  const size_t capacity = std::max<size_t>({bytes, 2 * b.capacity, 4096});
  // Previous contents need not survive: buffers are refilled per batch. The
  // backend's stream must be idle (the engine synchronizes after each batch).
  Release(b);
  absl::StatusOr<void*> host = backend_->AllocateHost(capacity);
  if (!host.ok()) return host.status();
  absl::StatusOr<void*> device = backend_->Allocate(capacity);
  if (!device.ok()) {
    backend_->FreeHost(*host);
    return device.status();
  }
  b.host = *host;
  b.device = *device;
  b.capacity = capacity;
  return absl::OkStatus();
}

absl::Status StagingBuffers::Upload(Slot slot, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  const StagedBuffer& b = buffers_[slot];
  return backend_->CopyToDevice(b.device, b.host, bytes);
}

absl::Status StagingBuffers::Download(Slot slot, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  const StagedBuffer& b = buffers_[slot];
  return backend_->CopyToHost(b.host, b.device, bytes);
}

}  // namespace gdn
