#include "server/engine/callback_runner.h"

#include <utility>

namespace gdn {

CallbackRunner::CallbackRunner() : thread_([this] { Loop(); }) {}

CallbackRunner::~CallbackRunner() { Stop(); }

void CallbackRunner::Post(absl::AnyInvocable<void() &&> closure) {
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

void CallbackRunner::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void CallbackRunner::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {  // stopping and drained
      stopped_ = true;
      return;
    }
    absl::AnyInvocable<void() &&> closure = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::move(closure)();
    lock.lock();
  }
}

}  // namespace gdn
