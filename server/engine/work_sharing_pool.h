// WorkSharingPool: a few threads that help a caller through a list of
// independent jobs. Run(n, job) calls job(0) .. job(n - 1), each exactly
// once, on the calling thread and on whichever pool threads are free, and
// returns when all n have returned. Jobs are taken from one shared counter,
// so a caller whose helpers are busy with another caller's jobs simply does
// more of its own: Run never waits for a job that nobody has started, and
// with no pool threads (or from a pool thread) it is a plain loop.
//
// Used to pack large requests (server/rpc/forward_request_reader.cc): a
// 32 MiB prefill's copy and finiteness check is one thread's ~3 ms memcpy
// otherwise, on the critical path of every call.
//
// Threading: Run from any number of threads at once. The destructor joins the
// threads; no Run may be in progress.
#ifndef GDN_SERVER_ENGINE_WORK_SHARING_POOL_H_
#define GDN_SERVER_ENGINE_WORK_SHARING_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace gdn {

class WorkSharingPool {
 public:
  explicit WorkSharingPool(int threads);  // threads >= 0
  ~WorkSharingPool();
  WorkSharingPool(const WorkSharingPool&) = delete;
  WorkSharingPool& operator=(const WorkSharingPool&) = delete;

  void Run(size_t jobs, absl::FunctionRef<void(size_t)> job);
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  // One Run's jobs: `next` hands out indices, `done` counts returns.
  struct Batch {
    Batch(size_t n, absl::FunctionRef<void(size_t)> f) : jobs(n), job(f) {}
    const size_t jobs;
    absl::FunctionRef<void(size_t)> job;
    std::atomic<size_t> next{0};
    std::atomic<size_t> done{0};
    // Runs jobs until none is left to start; returns how many it ran.
    size_t Drain();
  };

  void Loop();

  std::mutex mu_;
  std::condition_variable work_cv_;  // a batch was posted, or stopping
  std::condition_variable done_cv_;  // a helper finished its share of a batch
  std::deque<std::shared_ptr<Batch>> open_;  // batches with jobs left to start
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_WORK_SHARING_POOL_H_
