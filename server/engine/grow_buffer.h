// GrowBuffer: one buffer of backend memory (Backend::Allocate) or host
// transfer memory (Backend::AllocateHost) that only grows - to max(bytes,
// 2 x capacity) - and is reused for every batch of a lane: steady state
// allocates nothing. Contents are not kept when it grows.
//
// Threading: the engine thread (it calls the backend's Allocate / Free).
#ifndef GDN_SERVER_ENGINE_GROW_BUFFER_H_
#define GDN_SERVER_ENGINE_GROW_BUFFER_H_

#include <algorithm>
#include <cstddef>

#include "absl/status/status.h"
#include "kernels/backend.h"

namespace gdn {

class GrowBuffer {
 public:
  enum class Memory { kBackend, kHost };

  GrowBuffer(Backend* backend, Memory memory) : backend_(backend), memory_(memory) {}
  ~GrowBuffer() { Release(); }
  GrowBuffer(const GrowBuffer&) = delete;
  GrowBuffer& operator=(const GrowBuffer&) = delete;

  absl::Status Reserve(size_t bytes) {
    if (bytes <= capacity_) return absl::OkStatus();
    const size_t size = std::max(bytes, 2 * capacity_);
    Release();
    absl::StatusOr<void*> p =
        memory_ == Memory::kBackend ? backend_->Allocate(size) : backend_->AllocateHost(size);
    if (!p.ok()) return p.status();
    data_ = *p;
    capacity_ = size;
    return absl::OkStatus();
  }

  char* data() const { return static_cast<char*>(data_); }
  size_t capacity() const { return capacity_; }

 private:
  void Release() {
    if (data_ == nullptr) return;
    if (memory_ == Memory::kBackend) backend_->Free(data_);
    else backend_->FreeHost(data_);
    data_ = nullptr;
    capacity_ = 0;
  }

  Backend* backend_;
  Memory memory_;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_GROW_BUFFER_H_
