#include "server/engine/work_sharing_pool.h"

#include <algorithm>

namespace gdn {
namespace {

// Yields a Run's caller makes waiting for its helpers' last jobs before it
// sleeps (each a few hundred nanoseconds to microseconds).
constexpr int kDoneSpins = 2000;

}  // namespace

WorkSharingPool::WorkSharingPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

WorkSharingPool::~WorkSharingPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

size_t WorkSharingPool::Batch::Drain() {
  size_t ran = 0;
  for (size_t i = next.fetch_add(1); i < jobs; i = next.fetch_add(1)) {
    job(i);
    ++ran;
    done.fetch_add(1);
  }
  return ran;
}

void WorkSharingPool::Run(size_t jobs, absl::FunctionRef<void(size_t)> job, Helpers helpers) {
  const bool wake = helpers == Helpers::kThreads && !threads_.empty();
  if (jobs <= 1 || (!wake && !has_pollers())) {
    for (size_t i = 0; i < jobs; ++i) job(i);
    return;
  }
  auto batch = std::make_shared<Batch>(jobs, job);
  // The caller's own first job, claimed before any helper can see the
  // batch: the caller always runs at least one (its bytes stay in its cache).
  const size_t first = batch->next.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_.push_back(batch);
    open_count_.store(open_.size());
  }
  if (wake) {
    const size_t helpers_wanted = std::min(jobs - 1, threads_.size());
    for (size_t i = 0; i < helpers_wanted; ++i) work_cv_.notify_one();
  }
  batch->job(first);
  batch->done.fetch_add(1);
  batch->Drain();
  // Jobs a helper took are still running; wait for them, not for new ones:
  // spinning first, since a job takes tens of microseconds and a
  // condition variable's wake-up about as long.
  for (int spin = 0; spin < kDoneSpins && batch->done.load() != jobs; ++spin) {
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return batch->done.load() == jobs; });
  auto it = std::find(open_.begin(), open_.end(), batch);
  if (it != open_.end()) open_.erase(it);
  open_count_.store(open_.size());
}

std::shared_ptr<WorkSharingPool::Batch> WorkSharingPool::OpenBatchLocked() {
  for (const std::shared_ptr<Batch>& b : open_) {
    if (b->next.load() < b->jobs) return b;
  }
  return nullptr;
}

bool WorkSharingPool::Help() {
  if (open_count_.load() == 0) return false;
  std::shared_ptr<Batch> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch = OpenBatchLocked();
  }
  if (batch == nullptr) return false;
  const size_t ran = batch->Drain();
  if (ran > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    if (batch->done.load() == batch->jobs) done_cv_.notify_all();
  }
  return ran > 0;
}

void WorkSharingPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || !open_.empty(); });
    if (open_.empty()) return;  // stopping
    std::shared_ptr<Batch> batch = open_.front();
    if (batch->next.load() >= batch->jobs) {  // every job started: not ours to help
      open_.pop_front();
      open_count_.store(open_.size());
      continue;
    }
    lock.unlock();
    const size_t ran = batch->Drain();
    lock.lock();
    // The caller checks `done` under mu_: notifying under it loses no wake-up.
    if (ran > 0 && batch->done.load() == batch->jobs) done_cv_.notify_all();
  }
}

}  // namespace gdn
