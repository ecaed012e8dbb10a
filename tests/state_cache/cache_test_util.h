// Helpers shared by the state cache tests: small configs, a fake clock,
// random page contents and a stand-in "kernel" that reads and writes pages
// through pool().base the way the real kernels address them.
#ifndef GDN_TESTS_STATE_CACHE_CACHE_TEST_UTIL_H_
#define GDN_TESTS_STATE_CACHE_CACHE_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "kernels/gdn_params.h"
#include "state_cache/paged_state_cache.h"
#include "state_cache/state_cache.h"
#include "tests/state_cache/fake_backend.h"

namespace gdn {
namespace testing_cache {

// Small pages keep the tests fast; 256 is the smallest legal page.
inline constexpr size_t kPageBytes = 512;

inline StateCacheConfig SmallConfig(int num_layers, int device_pages,
                                    int host_pages, bool evict = false) {
  StateCacheConfig config;
  config.num_layers = num_layers;
  config.layout.state_bytes = kPageBytes;
  config.layout.page_bytes = kPageBytes;
  config.state_dtype = StateDType::kF32;
  config.device_budget_bytes = device_pages * kPageBytes;
  config.host_budget_bytes = host_pages * kPageBytes;
  config.evict_lru_sessions_when_full = evict;
  return config;
}

// A clock the test moves by hand.
class FakeClock {
 public:
  absl::Time Now() const { return *now_; }
  void Advance(absl::Duration d) { *now_ += d; }
  std::function<absl::Time()> AsFunction() const {
    auto now = now_;
    return [now] { return *now; };
  }

 private:
  std::shared_ptr<absl::Time> now_ =
      std::make_shared<absl::Time>(absl::FromUnixSeconds(1800000000));
};

// Random bytes that are never all zero (a zero page would hide a lost copy).
inline std::vector<uint8_t> RandomPage(std::mt19937_64& rng,
                                       size_t bytes = kPageBytes) {
  std::vector<uint8_t> page(bytes);
  for (uint8_t& b : page) b = static_cast<uint8_t>(rng());
  page[rng() % bytes] |= 1;
  return page;
}

inline uint8_t* PagePtr(const StatePoolView& pool, int32_t page) {
  return static_cast<uint8_t*>(pool.base) + page * pool.page_bytes;
}

inline std::vector<uint8_t> ReadDevicePage(const StatePoolView& pool,
                                           int32_t page) {
  const uint8_t* p = PagePtr(pool, page);
  return std::vector<uint8_t>(p, p + pool.page_bytes);
}

inline void WriteDevicePage(const StatePoolView& pool, int32_t page,
                            const std::vector<uint8_t>& bytes) {
  ASSERT_EQ(bytes.size(), static_cast<size_t>(pool.page_bytes));
  std::memcpy(PagePtr(pool, page), bytes.data(), bytes.size());
}

// One write of (session, layer) the way the engine does it, with the test
// standing in for the kernel: writes `bytes` into lease.write_page and
// commits at position + tokens. Returns the lease it used.
inline WriteLease WriteLayer(StateCache& cache, const std::string& session,
                             int32_t layer, const std::vector<uint8_t>& bytes,
                             int64_t tokens = 1) {
  absl::StatusOr<WriteLease> lease = cache.AcquireForWrite(session, layer);
  EXPECT_TRUE(lease.ok()) << lease.status();
  if (!lease.ok()) return WriteLease{};
  WriteDevicePage(cache.pool(), lease->write_page, bytes);
  cache.Commit(*lease, lease->position + tokens);
  return *lease;
}

inline std::vector<uint8_t> ExportBytes(StateCache& cache,
                                        const std::string& session,
                                        int32_t layer) {
  absl::StatusOr<StateCache::LayerState> state =
      cache.ExportLayer(session, layer);
  EXPECT_TRUE(state.ok()) << state.status();
  return state.ok() ? state->bytes : std::vector<uint8_t>{};
}

inline LayerStateInfo DescribeLayer(const StateCache& cache,
                                    const std::string& session,
                                    int32_t layer) {
  absl::StatusOr<SessionInfo> info = cache.DescribeSession(session);
  EXPECT_TRUE(info.ok()) << info.status();
  if (!info.ok() || layer >= static_cast<int32_t>(info->layers.size())) {
    return LayerStateInfo{};
  }
  return info->layers[layer];
}

inline absl::Status CheckInvariants(const StateCache& cache) {
  const auto* paged = dynamic_cast<const PagedStateCache*>(&cache);
  if (paged == nullptr) return absl::InternalError("not a PagedStateCache");
  return paged->CheckInvariants();
}

inline std::vector<int32_t> IdlePagesOldestFirst(const StateCache& cache) {
  return dynamic_cast<const PagedStateCache&>(cache)
      .IdleDevicePagesOldestFirst();
}

// Every field, for "nothing changed" checks.
inline void ExpectSameStats(const StateCacheStats& a, const StateCacheStats& b) {
  for (const auto& [x, y] : {std::make_pair(a.device, b.device),
                             std::make_pair(a.host, b.host)}) {
    EXPECT_EQ(x.pages_total, y.pages_total);
    EXPECT_EQ(x.pages_used, y.pages_used);
    EXPECT_EQ(x.pages_pinned, y.pages_pinned);
    EXPECT_EQ(x.bytes_total, y.bytes_total);
    EXPECT_EQ(x.bytes_used, y.bytes_used);
  }
  EXPECT_EQ(a.page_bytes, b.page_bytes);
  EXPECT_EQ(a.sessions, b.sessions);
  EXPECT_EQ(a.spills, b.spills);
  EXPECT_EQ(a.restores, b.restores);
  EXPECT_EQ(a.evictions, b.evictions);
  EXPECT_EQ(a.cow_copies, b.cow_copies);
  EXPECT_EQ(a.expired, b.expired);
}

// The cache under test on the fake backend and a fake clock, for the tests'
// fixtures (beside ::testing::Test or ::testing::TestWithParam): Make(config)
// (re)creates it. cache_ is declared last, so it goes before the backend it
// holds pages of.
class FakeCache {
 protected:
  void Make(StateCacheConfig config) {
    config.clock = clock_.AsFunction();
    cache_.reset();
    auto cache = StateCache::Create(config, &backend_);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = *std::move(cache);
  }

  void ExpectConsistent() const {
    absl::Status status = CheckInvariants(*cache_);
    EXPECT_TRUE(status.ok()) << status;
  }

  FakeBackend backend_;
  FakeClock clock_;
  std::unique_ptr<StateCache> cache_;
};

// The small cache most tests start from (3 layers, 8 device and 4 host
// pages) and a fixed-seed generator for their page contents.
class SmallCacheTest : public ::testing::Test, public FakeCache {
 protected:
  void SetUp() override { Make(SmallConfig(3, 8, 4)); }

  std::mt19937_64 rng_{20261129};
};

}  // namespace testing_cache
}  // namespace gdn

#endif  // GDN_TESTS_STATE_CACHE_CACHE_TEST_UTIL_H_
