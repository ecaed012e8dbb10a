// StateCache::Create: config checks, tier sizes and memory ownership.
#include "state_cache/state_cache.h"

#include "gtest/gtest.h"
#include "tests/state_cache/cache_test_util.h"
#include "tests/state_cache/fake_backend.h"

namespace gdn {
namespace {

using testing_cache::FakeBackend;
using testing_cache::kPageBytes;
using testing_cache::SmallConfig;

TEST(StateCacheCreateTest, SizesTiersFromBudgets) {
  FakeBackend backend;
  StateCacheConfig config = SmallConfig(4, 5, 3);
  config.device_budget_bytes += kPageBytes - 1;  // a partial page is unused
  config.host_budget_bytes += 17;
  auto cache = StateCache::Create(config, &backend);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const StatePoolView pool = (*cache)->pool();
  EXPECT_NE(pool.base, nullptr);
  EXPECT_EQ(pool.num_pages, 5);
  EXPECT_EQ(pool.page_bytes, static_cast<int64_t>(kPageBytes));
  EXPECT_EQ(pool.dtype, StateDType::kF32);
  const StateCacheStats stats = (*cache)->Stats();
  EXPECT_EQ(stats.device.pages_total, 5);
  EXPECT_EQ(stats.device.bytes_total, 5 * static_cast<int64_t>(kPageBytes));
  EXPECT_EQ(stats.host.pages_total, 3);
  EXPECT_EQ(stats.host.bytes_total, 3 * static_cast<int64_t>(kPageBytes));
  EXPECT_EQ(stats.page_bytes, static_cast<int64_t>(kPageBytes));
  EXPECT_EQ(stats.device.pages_used, 0);
  EXPECT_EQ(stats.sessions, 0);
  EXPECT_EQ((*cache)->config().num_layers, 4);
  EXPECT_EQ(backend.live_device_allocations(), 1);
  EXPECT_EQ(backend.live_host_allocations(), 1);
  cache->reset();
  EXPECT_EQ(backend.live_device_allocations(), 0);
  EXPECT_EQ(backend.live_host_allocations(), 0);
}

TEST(StateCacheCreateTest, BF16PoolCarriesItsDtype) {
  FakeBackend backend;
  StateCacheConfig config = SmallConfig(1, 2, 0);
  config.state_dtype = StateDType::kBF16;
  auto cache = StateCache::Create(config, &backend);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ((*cache)->pool().dtype, StateDType::kBF16);
  EXPECT_EQ(backend.live_host_allocations(), 0);  // no host tier asked for
}

TEST(StateCacheCreateTest, RealLayoutSizesPages) {
  FakeBackend backend;
  LayerShape shape;
  shape.num_qk_heads = 1;
  shape.num_v_heads = 2;
  shape.head_dim_k = 64;
  shape.head_dim_v = 64;
  StateCacheConfig config;
  config.num_layers = 2;
  config.layout = StatePageLayout::For(shape, StateDType::kF32);
  config.device_budget_bytes = 3 * config.layout.page_bytes;
  auto cache = StateCache::Create(config, &backend);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ((*cache)->pool().page_bytes, 2 * 64 * 64 * 4);
  EXPECT_EQ((*cache)->pool().num_pages, 3);
}

TEST(StateCacheCreateTest, RejectsBudgetWithoutADevicePage) {
  FakeBackend backend;
  StateCacheConfig config = SmallConfig(2, 0, 4);
  config.device_budget_bytes = kPageBytes - 1;
  auto cache = StateCache::Create(config, &backend);
  EXPECT_EQ(cache.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.live_device_allocations(), 0);
}

TEST(StateCacheCreateTest, RejectsBadConfigs) {
  FakeBackend backend;
  StateCacheConfig no_layers = SmallConfig(0, 2, 0);
  EXPECT_EQ(StateCache::Create(no_layers, &backend).status().code(),
            absl::StatusCode::kInvalidArgument);
  StateCacheConfig unaligned = SmallConfig(1, 2, 0);
  unaligned.layout.page_bytes = 300;
  unaligned.layout.state_bytes = 300;
  EXPECT_EQ(StateCache::Create(unaligned, &backend).status().code(),
            absl::StatusCode::kInvalidArgument);
  StateCacheConfig too_small = SmallConfig(1, 2, 0);
  too_small.layout.state_bytes = kPageBytes + 4;
  EXPECT_EQ(StateCache::Create(too_small, &backend).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StateCache::Create(SmallConfig(1, 2, 0), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.live_device_allocations(), 0);
}

TEST(StateCacheCreateTest, AllocationFailuresPropagateAndLeakNothing) {
  FakeBackend backend;
  backend.fail_next_allocate = true;
  EXPECT_EQ(StateCache::Create(SmallConfig(1, 2, 2), &backend).status().code(),
            absl::StatusCode::kResourceExhausted);
  backend.fail_next_allocate_host = true;
  EXPECT_EQ(StateCache::Create(SmallConfig(1, 2, 2), &backend).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(backend.live_device_allocations(), 0);
  EXPECT_EQ(backend.live_host_allocations(), 0);
}

// How far the coarse clock may lag: its last update can be more than one
// tick old (a tickless kernel updates it when a CPU wakes; a 6 ms lag with
// a 4 ms tick was seen in CI). Far below anything the stamps are used for
// (idle expiry counts seconds), far above any tick.
constexpr absl::Duration kCoarseLag = absl::Seconds(1);
// absl::Now() is its own estimate of the real-time clock (microseconds off).
constexpr absl::Duration kNowError = absl::Milliseconds(10);

TEST(CoarseNowTest, IsTheRealTimeClockLaggingAtMostATickOrSo) {
  const absl::Time before = absl::Now();
  const absl::Time coarse = CoarseNow();
  const absl::Time after = absl::Now();
  EXPECT_GE(coarse, before - kCoarseLag);
  EXPECT_LE(coarse, after + kNowError);  // never ahead of the time
}

TEST(StateCacheCreateTest, MissingClockFallsBackToCoarseNow) {
  FakeBackend backend;
  StateCacheConfig config = SmallConfig(1, 2, 0);
  config.clock = nullptr;
  auto cache = StateCache::Create(config, &backend);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const absl::Time before = absl::Now();
  ASSERT_TRUE((*cache)->CreateSession("s").ok());
  const absl::Time after = absl::Now();
  const absl::Time stamp = (*cache)->DescribeSession("s")->last_access;
  EXPECT_GE(stamp, before - kCoarseLag);
  EXPECT_LE(stamp, after + kNowError);
}

}  // namespace
}  // namespace gdn
