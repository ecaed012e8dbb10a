// WorkSharingPool: a few threads that help a caller through a list of
// independent jobs. Run(n, job) calls job(0) .. job(n - 1), each exactly
// once, on the calling thread (job(0) always) and on whichever pool threads
// (or pollers) are free, and returns when all n have returned. Jobs are
// taken from one shared counter,
// so a caller whose helpers are busy with another caller's jobs simply does
// more of its own: Run never waits for a job that nobody has started, and
// with no pool threads (or from a pool thread) it is a plain loop.
//
// Used to pack large requests (server/rpc/forward_request_reader.cc): a
// 32 MiB prefill's copy and finiteness check is one thread's ~3 ms memcpy
// otherwise, on the critical path of every call.
//
// Pollers: a thread that spins anyway (the engine's, idle, waiting for the
// next call) registers while it polls (Polling) and calls Help() in its
// loop. A Run with Helpers::kPollers wakes no pool thread (a wake-up costs
// more than a mid-sized request's copy) and is shared only with pollers;
// without one registered it is a plain loop.
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
  // Who may take a Run's jobs besides its caller.
  enum class Helpers { kThreads, kPollers };

  explicit WorkSharingPool(int threads);  // threads >= 0
  ~WorkSharingPool();
  WorkSharingPool(const WorkSharingPool&) = delete;
  WorkSharingPool& operator=(const WorkSharingPool&) = delete;

  void Run(size_t jobs, absl::FunctionRef<void(size_t)> job, Helpers helpers = Helpers::kThreads);
  int threads() const { return static_cast<int>(threads_.size()); }

  // Registers the calling thread as a poller for its lifetime.
  class Polling {
   public:
    explicit Polling(WorkSharingPool& pool) : pool_(pool) { pool_.pollers_.fetch_add(1); }
    ~Polling() { pool_.pollers_.fetch_sub(1); }
    Polling(const Polling&) = delete;
    Polling& operator=(const Polling&) = delete;

   private:
    WorkSharingPool& pool_;
  };
  // Runs jobs of an open Run until none is left to start; false if there
  // was none (cheap: one atomic load).
  bool Help();
  bool has_pollers() const { return pollers_.load() > 0; }

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
  // The first open batch with a job left to start, or null; mu_ held.
  std::shared_ptr<Batch> OpenBatchLocked();

  std::atomic<int> pollers_{0};
  std::atomic<size_t> open_count_{0};  // open_.size(), read without mu_
  std::mutex mu_;
  std::condition_variable work_cv_;  // a batch was posted, or stopping
  std::condition_variable done_cv_;  // a helper finished its share of a batch
  std::deque<std::shared_ptr<Batch>> open_;  // batches with jobs left to start
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_WORK_SHARING_POOL_H_
