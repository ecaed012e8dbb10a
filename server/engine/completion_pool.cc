#include "server/engine/completion_pool.h"

#include <algorithm>
#include <utility>

namespace gdn {

CompletionPool::CompletionPool(int threads) {
  for (int i = 0; i < std::max(threads, 1); ++i) threads_.emplace_back([this] { Loop(); });
}

CompletionPool::~CompletionPool() { Stop(); }

void CompletionPool::Post(absl::AnyInvocable<void() &&> closure) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_) {
      queue_.push_back(std::move(closure));
      cv_.notify_one();
      return;
    }
  }
  std::move(closure)();  // stopped: nobody else will run it
}

bool CompletionPool::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && running_ == 0;
}

void CompletionPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
}

void CompletionPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    absl::AnyInvocable<void() &&> closure = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    std::move(closure)();
    lock.lock();
    --running_;
  }
}

}  // namespace gdn
