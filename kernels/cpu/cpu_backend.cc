// The cpu backend: host memory, memcpy copies, and the recurrence of
// recurrence_kernel.h run over (sequence, value head) work items on a small
// persistent thread pool.
#include "kernels/cpu/cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/recurrence_kernel.h"
#include "kernels/cpu/thread_pool.h"

namespace gdn {
namespace {

constexpr size_t kAlignment = 256;

class CpuBackend;

// Runs every call at once on the calling thread (the kernels on the
// backend's pool), so work is done when the call returns: Record, WaitFor
// and WaitForBackend have nothing to order.
class CpuStream final : public BackendStream {
 public:
  explicit CpuStream(CpuBackend* backend) : backend_(backend) {}

  absl::Status Decode(const GdnOptions& options, const GdnParams& params) override;
  absl::Status Prefill(const GdnOptions& options, const GdnParams& params) override;
  absl::Status CopyToDevice(void* dst, const void* src_host, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src_host, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst_host, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst_host, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Gather(void* dst_base, const GatherCopy* items, const GatherCopy*,
                      int count) override {
    char* dst = static_cast<char*>(dst_base);
    for (int i = 0; i < count; ++i) std::memcpy(dst + items[i].dst_offset, items[i].src, items[i].bytes);
    return absl::OkStatus();
  }
  absl::Status WaitForBackend() override { return absl::OkStatus(); }
  absl::Status WaitFor(BackendStream&) override { return absl::OkStatus(); }
  absl::Status Record() override { return absl::OkStatus(); }
  absl::StatusOr<bool> Query() override { return true; }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  void SetOnDone(std::function<void()>) override {}

 private:
  CpuBackend* backend_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {
    scratch_.resize(pool_.num_threads());
    for (auto& s : scratch_) {
      s.reset(static_cast<float*>(
          std::aligned_alloc(64, RoundUp(cpu::ScratchFloats() * sizeof(float), 64))));
    }
  }

  absl::string_view name() const override { return "cpu"; }

  std::string device_description() const override {
    return absl::StrCat("host CPU (", cpu::KernelIsa(), ", ",
                        pool_.num_threads(), " threads)");
  }

  absl::Status Supports(const GdnOptions& options) const override {
    // Every dtype, gating mode and shape that ValidateOptions accepts
    // (K, V in {64, 128}, any GVA group) has a cpu path.
    return ValidateOptions(options);
  }

  absl::Status Decode(const GdnOptions& options,
                      const GdnParams& params) override {
    return Run(options, params, kMaxDecodeTokens);
  }

  absl::Status Prefill(const GdnOptions& options,
                       const GdnParams& params) override {
    return Run(options, params, /*max_tokens_per_seq=*/0);
  }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    const size_t size = RoundUp(std::max<size_t>(bytes, 1), kAlignment);
    void* ptr = std::aligned_alloc(kAlignment, size);
    if (ptr == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu backend: cannot allocate ", bytes, " bytes"));
    }
    allocations_[ptr] = size;
    used_bytes_ += size;
    return ptr;
  }

  void Free(void* ptr) override {
    if (ptr == nullptr) return;
    auto it = allocations_.find(ptr);
    if (it != allocations_.end()) {
      used_bytes_ -= it->second;
      allocations_.erase(it);
    }
    std::free(ptr);
  }

  // Host memory is host memory: the same allocator, counted apart.
  absl::StatusOr<void*> AllocateHost(size_t bytes) override {
    const size_t size = RoundUp(std::max<size_t>(bytes, 1), kAlignment);
    void* ptr = std::aligned_alloc(kAlignment, size);
    if (ptr == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu backend: cannot allocate ", bytes, " host bytes"));
    }
    return ptr;
  }
  void FreeHost(void* ptr) override { std::free(ptr); }

  absl::Status CopyToDevice(void* dst, const void* src_host,
                            size_t bytes) override {
    return Copy(dst, src_host, bytes);
  }
  absl::Status CopyToHost(void* dst_host, const void* src,
                          size_t bytes) override {
    return Copy(dst_host, src, bytes);
  }
  absl::Status CopyOnDevice(void* dst, const void* src, size_t bytes) override {
    return Copy(dst, src, bytes);
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::StatusOr<std::unique_ptr<BackendStream>> CreateStream(bool) override {
    return std::unique_ptr<BackendStream>(std::make_unique<CpuStream>(this));
  }

  DeviceMemoryInfo MemoryInfo() const override {
    DeviceMemoryInfo info;
    info.used_bytes = used_bytes_;
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0) {
      info.total_bytes = static_cast<size_t>(pages) * page_size;
    }
    return info;
  }

 private:
  struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
  };

  static size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

  static absl::Status Copy(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return absl::OkStatus();
    if (dst == nullptr || src == nullptr) {
      return absl::InvalidArgumentError("cpu backend: copy with a null pointer");
    }
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }

  // Page ids are read before anything is written: a bad id fails the call
  // with the pool untouched.
  static absl::Status CheckPages(const GdnParams& p) {
    for (int32_t i = 0; i < p.num_seqs; ++i) {
      const int32_t initial = p.initial_pages[i];
      const int32_t final_page = p.final_pages[i];
      if (initial != kZeroStatePage &&
          (initial < 0 || initial >= p.pool.num_pages)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "initial_pages[", i, "] = ", initial, " is outside [0, ",
            p.pool.num_pages, ") and not kZeroStatePage"));
      }
      if (final_page < 0 || final_page >= p.pool.num_pages) {
        return absl::InvalidArgumentError(
            absl::StrCat("final_pages[", i, "] = ", final_page,
                         " is outside [0, ", p.pool.num_pages, ")"));
      }
      if (p.checkpoint_interval == 0) continue;
      const int32_t count = CheckpointCount(p.cu_seqlens_host[i + 1] - p.cu_seqlens_host[i],
                                            p.checkpoint_interval);
      for (int32_t m = 0; m < count; ++m) {
        const int32_t slot = i * p.checkpoints_per_seq + m;
        const int32_t page = p.checkpoint_pages[slot];
        if (page != kZeroStatePage && (page < 0 || page >= p.pool.num_pages)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "checkpoint_pages[", slot, "] = ", page, " is outside [0, ", p.pool.num_pages,
              ") and not kZeroStatePage"));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status Run(const GdnOptions& options, const GdnParams& p,
                   int max_tokens_per_seq) {
    absl::Status st = Supports(options);
    if (!st.ok()) return st;
    st = ValidateParams(options, p, max_tokens_per_seq);
    if (!st.ok()) return st;
    st = CheckPages(p);
    if (!st.ok()) return st;

    const LayerShape& s = options.shape;
    char* base = static_cast<char*>(p.pool.base);
    auto page = [&](int32_t id) { return base + id * p.pool.page_bytes; };

    // Work item = (sequence, value head, column range). Columns of the state
    // never mix, so when there are fewer (sequence, head) pairs than ~2 per
    // thread (one long prefill on few heads), heads are split by columns.
    const int32_t hv = s.num_v_heads;
    const int64_t pairs = int64_t{p.num_seqs} * hv;
    int splits = 1;
    while (pairs * splits < 2 * pool_.num_threads() &&
           s.head_dim_v / (2 * splits) >= cpu::kColumnTile) {
      splits *= 2;
    }
    const int32_t split_width = s.head_dim_v / splits;

    // Longest sequences first so a long prefill does not start last and run
    // alone.
    order_.resize(p.num_seqs);
    std::iota(order_.begin(), order_.end(), 0);
    const int32_t* cu = p.cu_seqlens_host;
    std::stable_sort(order_.begin(), order_.end(), [cu](int32_t a, int32_t b) {
      return cu[a + 1] - cu[a] > cu[b + 1] - cu[b];
    });
    pool_.ParallelFor(pairs * splits, [&](int64_t item, int thread_index) {
      const int32_t seq = order_[item / (int64_t{hv} * splits)];
      const int64_t in_seq = item % (int64_t{hv} * splits);
      cpu::HeadTask task;
      task.head = static_cast<int32_t>(in_seq / splits);
      task.v_begin = static_cast<int32_t>(in_seq % splits) * split_width;
      task.v_end = task.v_begin + split_width;
      task.first_token = cu[seq];
      task.end_token = cu[seq + 1];
      const int32_t initial = p.initial_pages[seq];
      task.initial_page = initial == kZeroStatePage ? nullptr : page(initial);
      task.final_page = page(p.final_pages[seq]);
      if (p.checkpoint_interval > 0) {
        task.checkpoint_interval = p.checkpoint_interval;
        task.checkpoint_count = CheckpointCount(cu[seq + 1] - cu[seq], p.checkpoint_interval);
        task.checkpoint_pages = p.checkpoint_pages + int64_t{seq} * p.checkpoints_per_seq;
      }
      cpu::RunHead(options, p, task, scratch_[thread_index].get());
    });
    return absl::OkStatus();
  }

  cpu::ThreadPool pool_;
  std::vector<std::unique_ptr<float, FreeDeleter>> scratch_;  // per thread
  std::vector<int32_t> order_;                                // [N]
  std::unordered_map<void*, size_t> allocations_;
  size_t used_bytes_ = 0;
};

absl::Status CpuStream::Decode(const GdnOptions& options, const GdnParams& params) {
  return backend_->Decode(options, params);
}

absl::Status CpuStream::Prefill(const GdnOptions& options, const GdnParams& params) {
  return backend_->Prefill(options, params);
}

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(int threads) {
  if (threads <= 0) {
    threads = std::max(1u, std::thread::hardware_concurrency());
  }
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace gdn
