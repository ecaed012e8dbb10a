// CompletionPool: runs posted closures (the `done` of finished Forward calls:
// encode the response around o's bytes, finish the RPC) on a few threads of
// its own, so that the engine goes on with the next batch and one large
// response never holds up a small one behind it.
//
// Threading: Post from any thread. Stop (also run by the destructor) runs
// everything already posted, then joins; a Post after Stop runs the closure
// on the caller's thread.
#ifndef GDN_SERVER_ENGINE_COMPLETION_POOL_H_
#define GDN_SERVER_ENGINE_COMPLETION_POOL_H_

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"

namespace gdn {

class CompletionPool {
 public:
  explicit CompletionPool(int threads);
  ~CompletionPool();  // Stop()

  CompletionPool(const CompletionPool&) = delete;
  CompletionPool& operator=(const CompletionPool&) = delete;

  void Post(absl::AnyInvocable<void() &&> closure);
  void Stop();
  // Closures posted and not yet started (the engine runs small completions
  // itself when the pool is idle).
  bool idle();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<absl::AnyInvocable<void() &&>> queue_;
  int running_ = 0;  // closures being run
  bool stopping_ = false;
  bool stopped_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_COMPLETION_POOL_H_
