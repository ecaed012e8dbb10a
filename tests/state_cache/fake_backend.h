// A Backend for testing the state cache without any kernel: "device" and
// host memory are malloc'd, copies are memcpy, Decode / Prefill are
// Unimplemented. It counts every call and can be told to fail the next copy
// or allocation, so tests can see that a fork copies nothing and that a
// failed copy leaves the cache as it was.
#ifndef GDN_TESTS_STATE_CACHE_FAKE_BACKEND_H_
#define GDN_TESTS_STATE_CACHE_FAKE_BACKEND_H_

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace gdn {
namespace testing_cache {

class FakeBackend : public Backend {
 public:
  ~FakeBackend() override {
    for (void* ptr : device_) std::free(ptr);
    for (void* ptr : host_) std::free(ptr);
  }

  absl::string_view name() const override { return "fake"; }
  std::string device_description() const override { return "fake memory"; }
  absl::Status Supports(const GdnOptions&) const override {
    return absl::OkStatus();
  }
  absl::Status Decode(const GdnOptions&, const GdnParams&) override {
    return absl::UnimplementedError("fake backend has no kernels");
  }
  absl::Status Prefill(const GdnOptions&, const GdnParams&) override {
    return absl::UnimplementedError("fake backend has no kernels");
  }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    if (fail_next_allocate) {
      fail_next_allocate = false;
      return absl::ResourceExhaustedError("fake: device allocation refused");
    }
    void* ptr = AlignedAlloc(bytes);
    device_.insert(ptr);
    device_bytes_ += bytes;
    return ptr;
  }
  void Free(void* ptr) override {
    if (device_.erase(ptr) == 1) std::free(ptr);
  }
  absl::StatusOr<void*> AllocateHost(size_t bytes) override {
    if (fail_next_allocate_host) {
      fail_next_allocate_host = false;
      return absl::ResourceExhaustedError("fake: host allocation refused");
    }
    void* ptr = AlignedAlloc(bytes);
    host_.insert(ptr);
    return ptr;
  }
  void FreeHost(void* ptr) override {
    if (host_.erase(ptr) == 1) std::free(ptr);
  }

  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (fail_next_copy_to_device) {
      fail_next_copy_to_device = false;
      return absl::InternalError("fake: copy to device failed");
    }
    ++copies_to_device;
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    if (fail_next_copy_to_host) {
      fail_next_copy_to_host = false;
      return absl::InternalError("fake: copy to host failed");
    }
    ++copies_to_host;
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyOnDevice(void* dst, const void* src, size_t bytes) override {
    ++copies_on_device;
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    ++synchronizes;
    return absl::OkStatus();
  }
  DeviceMemoryInfo MemoryInfo() const override {
    DeviceMemoryInfo info;
    info.used_bytes = device_bytes_;
    info.total_bytes = device_bytes_;
    return info;
  }

  int live_device_allocations() const { return static_cast<int>(device_.size()); }
  int live_host_allocations() const { return static_cast<int>(host_.size()); }
  int total_copies() const {
    return copies_to_device + copies_to_host + copies_on_device;
  }

  int copies_to_device = 0;
  int copies_to_host = 0;
  int copies_on_device = 0;
  int synchronizes = 0;
  bool fail_next_allocate = false;
  bool fail_next_allocate_host = false;
  bool fail_next_copy_to_device = false;
  bool fail_next_copy_to_host = false;

 private:
  static void* AlignedAlloc(size_t bytes) {
    // The Backend contract: at least 256-byte alignment.
    const size_t rounded = (bytes + 255) / 256 * 256;
    return std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
  }

  std::set<void*> device_;
  std::set<void*> host_;
  size_t device_bytes_ = 0;
};

}  // namespace testing_cache
}  // namespace gdn

#endif  // GDN_TESTS_STATE_CACHE_FAKE_BACKEND_H_
