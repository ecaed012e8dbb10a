// A small persistent thread pool for the cpu backend: ParallelFor hands items
// 0..n-1 to the calling thread plus the pool's workers through one shared
// atomic counter (dynamic scheduling, so long and short items balance).
//
// Threading: ParallelFor may be called by one thread at a time (the backend's
// owner); it returns when every item has run.
#ifndef GDN_KERNELS_CPU_THREAD_POOL_H_
#define GDN_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gdn::cpu {

class ThreadPool {
 public:
  // num_threads counts the caller: num_threads - 1 workers are started.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(item, thread_index) for every item in [0, n); thread_index is in
  // [0, num_threads()) and identifies the thread (for per-thread scratch).
  using ItemFn = std::function<void(int64_t item, int thread_index)>;
  void ParallelFor(int64_t n, const ItemFn& fn);

 private:
  void WorkerLoop(int thread_index);
  void RunItems(int thread_index);

  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // bumped per ParallelFor; workers wait on it
  bool stop_ = false;
  int busy_workers_ = 0;
  const ItemFn* job_ = nullptr;
  int64_t job_size_ = 0;
  std::atomic<int64_t> next_item_{0};
  std::vector<std::thread> workers_;
};

}  // namespace gdn::cpu

#endif  // GDN_KERNELS_CPU_THREAD_POOL_H_
