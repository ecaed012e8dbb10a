#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gdn::cpu {
namespace {

TEST(ThreadPoolTest, RunsEveryItemExactlyOnce) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 3, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t item, int thread_index) {
        EXPECT_GE(thread_index, 0);
        EXPECT_LT(thread_index, threads);
        hits[item].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << i;
    }
  }
}

TEST(ThreadPoolTest, WorkersReallyRunInParallel) {
  // Two items that wait for each other finish only if two threads take them.
  ThreadPool pool(2);
  std::atomic<int> arrived{0};
  std::set<int> thread_indices;
  std::mutex mu;
  pool.ParallelFor(2, [&](int64_t, int thread_index) {
    arrived.fetch_add(1);
    while (arrived.load() < 2) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(mu);
    thread_indices.insert(thread_index);
  });
  EXPECT_EQ(thread_indices.size(), 2u);
}

TEST(ThreadPoolTest, ReusableManyTimes) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 500; ++round) {
    pool.ParallelFor(7, [&](int64_t item, int) { sum.fetch_add(item + 1); });
  }
  EXPECT_EQ(sum.load(), 500 * 28);
}

}  // namespace
}  // namespace gdn::cpu
