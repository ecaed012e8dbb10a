#include "server/engine/completion_pool.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gdn {
namespace {

TEST(CompletionPoolTest, RunsEveryClosureOnItsOwnThreads) {
  std::mutex mu;
  std::set<std::thread::id> threads;
  int ran = 0;
  {
    CompletionPool pool(3);
    for (int i = 0; i < 1000; ++i) {
      pool.Post([&] {
        std::lock_guard<std::mutex> lock(mu);
        ++ran;
        threads.insert(std::this_thread::get_id());
      });
    }
  }  // the destructor drains the queue
  EXPECT_EQ(ran, 1000);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
  EXPECT_LE(threads.size(), 3u);
}

TEST(CompletionPoolTest, ABlockedClosureDoesNotHoldUpTheNextOne) {
  // The point of several threads: a slow completion (a large response) must
  // not delay a small one posted after it.
  CompletionPool pool(2);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false, second_ran = false;
  pool.Post([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });
  });
  pool.Post([&] {
    std::lock_guard<std::mutex> lock(mu);
    second_ran = true;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return second_ran; });  // hangs (ctest timeout) if serialized
    release = true;
    cv.notify_all();
  }
  pool.Stop();
  EXPECT_TRUE(pool.idle());
}

TEST(CompletionPoolTest, TakesMoveOnlyClosuresAndRunsPostsFromManyThreads) {
  std::atomic<int> sum{0};
  CompletionPool pool(2);
  std::vector<std::thread> posters;
  for (int t = 0; t < 4; ++t) {
    posters.emplace_back([&] {
      for (int i = 0; i < 250; ++i) {
        auto value = std::make_unique<int>(1);
        pool.Post([value = std::move(value), &sum] { sum += *value; });
      }
    });
  }
  for (std::thread& t : posters) t.join();
  pool.Stop();
  EXPECT_EQ(sum.load(), 1000);
}

TEST(CompletionPoolTest, AfterStopAPostRunsOnTheCallersThread) {
  CompletionPool pool(1);
  pool.Stop();
  pool.Stop();  // idempotent
  std::thread::id ran_on;
  pool.Post([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace gdn
