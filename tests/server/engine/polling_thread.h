// A thread that polls a WorkSharingPool until it is destroyed (registered
// with Polling, calling Help() in a loop): the idle engine thread's part in
// packing, for tests. The constructor returns once it is registered.
#ifndef GDN_TESTS_SERVER_ENGINE_POLLING_THREAD_H_
#define GDN_TESTS_SERVER_ENGINE_POLLING_THREAD_H_

#include <atomic>
#include <thread>

#include "server/engine/work_sharing_pool.h"

namespace gdn::testing_engine {

class PollingThread {
 public:
  explicit PollingThread(WorkSharingPool& pool)
      : thread_([this, &pool] {
          WorkSharingPool::Polling polling(pool);
          registered_ = true;
          while (!stop_) {
            if (!pool.Help()) std::this_thread::yield();
          }
        }) {
    while (!registered_) std::this_thread::yield();
  }
  ~PollingThread() {
    stop_ = true;
    thread_.join();
  }
  PollingThread(const PollingThread&) = delete;
  PollingThread& operator=(const PollingThread&) = delete;

 private:
  std::atomic<bool> registered_{false}, stop_{false};
  std::thread thread_;  // last: starts after the flags exist
};

}  // namespace gdn::testing_engine

#endif  // GDN_TESTS_SERVER_ENGINE_POLLING_THREAD_H_
