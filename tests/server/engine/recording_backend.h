// A Backend for testing the engine without kernels: memory is malloc'd,
// copies are memcpy, and its streams record every operation (lane, kind,
// sequences, tokens, pages) in one shared log. Its "kernel" writes o = v
// (both [T, Hv, V] in the activation dtype), so a test sees which rows went
// where. A stream can be held: its batches stay
// in flight (Query false) until the test releases it, so tests can see what
// the engine does while the device is busy.
//
// Threading: the engine thread calls everything but AllocateHost /
// FreeHost (any thread); the test reads the log and holds / releases
// streams from its own thread: all under one mutex.
#ifndef GDN_TESTS_SERVER_ENGINE_RECORDING_BACKEND_H_
#define GDN_TESTS_SERVER_ENGINE_RECORDING_BACKEND_H_

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernels/backend.h"

namespace gdn::testing_engine {

struct Op {
  enum Kind { kUpload, kGather, kWaitForBackend, kWaitFor, kDecode, kPrefill, kDownload, kDone };
  Kind kind;
  int stream = 0;
  // kDecode / kPrefill: per sequence tokens and pages.
  std::vector<int32_t> tokens, initial_pages, final_pages;
  int other_stream = -1;  // kWaitFor
  int gather_items = 0;   // kGather
  // kDecode / kPrefill: GdnParams::checkpoint_interval and its slots
  // [num_seqs * checkpoints_per_seq] (speculative drafts' per-token pages).
  int32_t checkpoint_interval = 0;
  std::vector<int32_t> checkpoint_pages;
  std::thread::id thread;  // the thread that issued it
};

class RecordingBackend;

class RecordingStream final : public BackendStream {
 public:
  RecordingStream(RecordingBackend* backend, int index) : backend_(backend), index_(index) {}
  absl::Status Decode(const GdnOptions& o, const GdnParams& p) override { return Run(o, p, true); }
  absl::Status Prefill(const GdnOptions& o, const GdnParams& p) override { return Run(o, p, false); }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override;
  absl::Status Gather(void* dst, const GatherCopy* items, const GatherCopy*, int count) override;
  absl::Status WaitForBackend() override;
  absl::Status WaitFor(BackendStream& other) override;
  absl::Status Record() override;
  absl::StatusOr<bool> Query() override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  void SetOnDone(std::function<void()> on_done) override { on_done_ = std::move(on_done); }

  int index() const { return index_; }

 private:
  absl::Status Run(const GdnOptions& o, const GdnParams& p, bool decode);

  RecordingBackend* backend_;
  const int index_;
  std::function<void()> on_done_;
  friend class RecordingBackend;
};

class RecordingBackend final : public Backend {
 public:
  ~RecordingBackend() override {
    for (void* p : allocations_) std::free(p);
  }
  absl::string_view name() const override { return "recording"; }
  std::string device_description() const override { return "recording fake"; }
  absl::Status Supports(const GdnOptions&) const override { return absl::OkStatus(); }
  absl::Status Decode(const GdnOptions&, const GdnParams&) override {
    return absl::UnimplementedError("the engine runs kernels on its streams");
  }
  absl::Status Prefill(const GdnOptions&, const GdnParams&) override {
    return absl::UnimplementedError("the engine runs kernels on its streams");
  }
  absl::StatusOr<void*> Allocate(size_t bytes) override { return Alloc(bytes); }
  void Free(void*) override {}  // freed at the end (the engine frees on growth)
  absl::StatusOr<void*> AllocateHost(size_t bytes) override { return Alloc(bytes); }
  void FreeHost(void*) override {}
  absl::Status CopyToDevice(void* d, const void* s, size_t n) override { return Copy(d, s, n); }
  absl::Status CopyToHost(void* d, const void* s, size_t n) override { return Copy(d, s, n); }
  absl::Status CopyOnDevice(void* d, const void* s, size_t n) override { return Copy(d, s, n); }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  DeviceMemoryInfo MemoryInfo() const override { return {}; }
  absl::StatusOr<std::unique_ptr<BackendStream>> CreateStream(bool) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto stream = std::make_unique<RecordingStream>(this, static_cast<int>(streams_.size()));
    streams_.push_back(stream.get());
    held_.push_back(false);
    pending_.push_back(0);
    return std::unique_ptr<BackendStream>(std::move(stream));
  }

  // Batches recorded on `stream` stay in flight until Release.
  void Hold(int stream) {
    std::lock_guard<std::mutex> lock(mu_);
    held_[stream] = true;
  }
  void Release(int stream) {
    std::function<void()> wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_[stream] = false;
      wake = streams_[stream]->on_done_;
    }
    if (wake) wake();  // as a device would, from another thread
  }
  // The next Decode / Prefill fails (a kernel error).
  void FailNextKernel() {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_kernel_ = true;
  }

  std::vector<Op> Log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  // Waits until `pred(log)` holds (false after 30 s: the test then fails).
  bool WaitFor(const std::function<bool(const std::vector<Op>&)>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return pred(log_); });
  }

 private:
  friend class RecordingStream;
  void* Alloc(size_t bytes) {
    void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
    std::lock_guard<std::mutex> lock(mu_);
    allocations_.push_back(p);
    return p;
  }
  static absl::Status Copy(void* d, const void* s, size_t n) {
    if (n > 0) std::memcpy(d, s, n);
    return absl::OkStatus();
  }
  void Append(Op op) {
    op.thread = std::this_thread::get_id();
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(std::move(op));
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<void*> allocations_;
  std::vector<RecordingStream*> streams_;
  std::vector<bool> held_;
  std::vector<int> pending_;  // Record()s not yet reported done
  std::vector<Op> log_;
  bool fail_next_kernel_ = false;
};

inline absl::Status RecordingStream::CopyToDevice(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  backend_->Append({Op::kUpload, index_});
  return absl::OkStatus();
}

inline absl::Status RecordingStream::CopyToHost(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  backend_->Append({Op::kDownload, index_});
  return absl::OkStatus();
}

inline absl::Status RecordingStream::Gather(void* dst, const GatherCopy* items, const GatherCopy*,
                                            int count) {
  for (int i = 0; i < count; ++i) {
    std::memcpy(static_cast<char*>(dst) + items[i].dst_offset, items[i].src, items[i].bytes);
  }
  Op op{Op::kGather, index_};
  op.gather_items = count;
  backend_->Append(op);
  return absl::OkStatus();
}

inline absl::Status RecordingStream::WaitForBackend() {
  backend_->Append({Op::kWaitForBackend, index_});
  return absl::OkStatus();
}

inline absl::Status RecordingStream::WaitFor(BackendStream& other) {
  Op op{Op::kWaitFor, index_};
  op.other_stream = static_cast<RecordingStream&>(other).index_;
  backend_->Append(op);
  return absl::OkStatus();
}

inline absl::Status RecordingStream::Record() {
  std::lock_guard<std::mutex> lock(backend_->mu_);
  ++backend_->pending_[index_];
  return absl::OkStatus();
}

inline absl::StatusOr<bool> RecordingStream::Query() {
  bool report = false;
  {
    std::lock_guard<std::mutex> lock(backend_->mu_);
    if (backend_->held_[index_]) return false;
    report = backend_->pending_[index_] > 0;
    backend_->pending_[index_] = 0;
  }
  if (report) backend_->Append({Op::kDone, index_});
  return true;
}

inline absl::Status RecordingStream::Run(const GdnOptions& o, const GdnParams& p, bool decode) {
  {
    std::lock_guard<std::mutex> lock(backend_->mu_);
    if (backend_->fail_next_kernel_) {
      backend_->fail_next_kernel_ = false;
      return absl::InternalError("recording backend: injected kernel failure");
    }
  }
  Op op{decode ? Op::kDecode : Op::kPrefill, index_};
  for (int32_t i = 0; i < p.num_seqs; ++i) {
    op.tokens.push_back(p.cu_seqlens_host[i + 1] - p.cu_seqlens_host[i]);
    op.initial_pages.push_back(p.initial_pages[i]);
    op.final_pages.push_back(p.final_pages[i]);
  }
  op.checkpoint_interval = p.checkpoint_interval;
  if (p.checkpoint_pages != nullptr) {
    op.checkpoint_pages.assign(p.checkpoint_pages,
                               p.checkpoint_pages + p.num_seqs * p.checkpoints_per_seq);
  }
  // o = v: every row of o comes from the same row of v.
  const size_t row = static_cast<size_t>(o.shape.num_v_heads) * o.shape.head_dim_v *
                     DTypeSize(o.input_dtype);
  std::memcpy(p.o, p.v, row * p.total_tokens);
  backend_->Append(std::move(op));
  return absl::OkStatus();
}

}  // namespace gdn::testing_engine

#endif  // GDN_TESTS_SERVER_ENGINE_RECORDING_BACKEND_H_
