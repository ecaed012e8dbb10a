#include "server/engine/work_sharing_pool.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/engine/polling_thread.h"

namespace gdn {
namespace {

TEST(WorkSharingPoolTest, EveryJobRunsExactlyOnceAndRunReturnsAfterTheLast) {
  WorkSharingPool pool(3);
  for (size_t jobs : {0u, 1u, 2u, 7u, 1000u}) {
    std::vector<std::atomic<int>> ran(jobs);
    std::atomic<size_t> finished{0};
    pool.Run(jobs, [&](size_t i) {
      ran[i].fetch_add(1);
      finished.fetch_add(1);
    });
    EXPECT_EQ(finished.load(), jobs);  // nothing still running after Run
    for (size_t i = 0; i < jobs; ++i) ASSERT_EQ(ran[i].load(), 1) << "job " << i;
  }
}

TEST(WorkSharingPoolTest, PoolThreadsHelpTheCaller) {
  // Job 0 waits until another thread has run a job: it only returns if a
  // pool thread took part (a caller alone would hang: ctest's timeout).
  WorkSharingPool pool(2);
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::thread::id> threads;
  const std::thread::id caller = std::this_thread::get_id();
  pool.Run(2, [&](size_t) {
    std::unique_lock<std::mutex> lock(mu);
    threads.insert(std::this_thread::get_id());
    cv.notify_all();
    cv.wait(lock, [&] { return threads.size() == 2; });
  });
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads.count(caller), 1u);
}

TEST(WorkSharingPoolTest, WithoutThreadsTheCallerRunsEverything) {
  WorkSharingPool pool(0);
  const std::thread::id caller = std::this_thread::get_id();
  int ran = 0;
  pool.Run(50, [&](size_t) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    ++ran;
  });
  EXPECT_EQ(ran, 50);
}

// `callers` threads each Run `rounds` times `jobs` jobs that add the
// caller's number to their slot (Helpers::kPollers on odd rounds when
// `alternate`): how many slots came out wrong (run twice, never, or by
// another caller's job).
int WrongSlotsOverCallers(WorkSharingPool& pool, int callers, int rounds, int jobs,
                          bool alternate) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&, c] {
      for (int round = 0; round < rounds; ++round) {
        std::vector<int> seen(jobs, 0);
        pool.Run(jobs, [&](size_t i) { seen[i] += c + 1; },
                 alternate && round % 2 == 1 ? WorkSharingPool::Helpers::kPollers
                                             : WorkSharingPool::Helpers::kThreads);
        for (int v : seen) wrong += v != c + 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return wrong.load();
}

TEST(WorkSharingPoolTest, ManyCallersAtOnceEachGetTheirOwnJobsDone) {
  // Callers outnumber the pool: a caller whose helpers are elsewhere runs
  // its own jobs, and no caller sees another's.
  WorkSharingPool pool(2);
  EXPECT_EQ(WrongSlotsOverCallers(pool, /*callers=*/6, /*rounds=*/200, /*jobs=*/13,
                                  /*alternate=*/false),
            0);
}

// A poller (the idle engine thread: Polling, then Help() in its loop) takes
// jobs of a Helpers::kPollers Run; no pool thread is woken for one.
TEST(WorkSharingPoolTest, APollerHelpsAPollersRun) {
  WorkSharingPool pool(0);
  testing_engine::PollingThread poller(pool);
  // Job 0 returns only once another thread has run a job: the poller.
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::thread::id> threads;
  pool.Run(
      2,
      [&](size_t) {
        std::unique_lock<std::mutex> lock(mu);
        threads.insert(std::this_thread::get_id());
        cv.notify_all();
        cv.wait(lock, [&] { return threads.size() == 2; });
      },
      WorkSharingPool::Helpers::kPollers);
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 1u);
}

TEST(WorkSharingPoolTest, APollersRunWithoutPollersRunsOnTheCallerAlone) {
  WorkSharingPool pool(2);  // threads, but none is woken for it
  const std::thread::id caller = std::this_thread::get_id();
  int ran = 0;
  pool.Run(
      20,
      [&](size_t) {
        EXPECT_EQ(std::this_thread::get_id(), caller);
        ++ran;
      },
      WorkSharingPool::Helpers::kPollers);
  EXPECT_EQ(ran, 20);
  EXPECT_FALSE(pool.Help());  // nothing left open
}

TEST(WorkSharingPoolTest, CallersAndPollersAtOnceRunEachJobOnceForItsCaller) {
  WorkSharingPool pool(1);
  testing_engine::PollingThread first_poller(pool), second_poller(pool);
  EXPECT_EQ(WrongSlotsOverCallers(pool, /*callers=*/4, /*rounds=*/200, /*jobs=*/9,
                                  /*alternate=*/true),
            0);
}

}  // namespace
}  // namespace gdn
