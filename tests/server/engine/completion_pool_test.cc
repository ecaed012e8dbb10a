#include "server/engine/callback_runner.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gdn {
namespace {

TEST(CallbackRunnerTest, RunsEveryClosureInPostingOrderOnItsOwnThread) {
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  {
    CallbackRunner runner;
    for (int i = 0; i < 1000; ++i) {
      runner.Post([&, i] {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(i);
        threads.push_back(std::this_thread::get_id());
      });
    }
  }  // the destructor drains the queue
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(order[i], i);
  for (const std::thread::id& id : threads) {
    EXPECT_NE(id, std::this_thread::get_id());
    EXPECT_EQ(id, threads[0]);
  }
}

TEST(CallbackRunnerTest, TakesMoveOnlyClosuresAndRunsPostsFromManyThreads) {
  std::atomic<int> sum{0};
  CallbackRunner runner;
  std::vector<std::thread> posters;
  for (int t = 0; t < 4; ++t) {
    posters.emplace_back([&] {
      for (int i = 0; i < 250; ++i) {
        auto value = std::make_unique<int>(1);
        runner.Post([value = std::move(value), &sum] { sum += *value; });
      }
    });
  }
  for (std::thread& t : posters) t.join();
  runner.Stop();
  EXPECT_EQ(sum.load(), 1000);
}

TEST(CallbackRunnerTest, AfterStopAPostRunsOnTheCallersThread) {
  CallbackRunner runner;
  runner.Stop();
  runner.Stop();  // idempotent
  std::thread::id ran_on;
  runner.Post([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace gdn
