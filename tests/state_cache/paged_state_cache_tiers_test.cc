// The two tiers of the paged state cache: LRU spill to the host tier,
// restore on the next write, pinning, exhaustion (ResourceExhausted that
// changes nothing) and LRU session eviction.
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "state_cache/paged_state_cache.h"
#include "tests/state_cache/cache_test_util.h"
#include "tests/state_cache/fake_backend.h"

namespace gdn {
namespace {

using namespace testing_cache;  // NOLINT: test helpers
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class TiersTest : public ::testing::Test, public FakeCache {
 protected:
  void Make(int num_layers, int device_pages, int host_pages,
            bool evict = false) {
    FakeCache::Make(SmallConfig(num_layers, device_pages, host_pages, evict));
  }

  // Creates `id` (if new) and writes random bytes to `layer`, remembering
  // them and the position.
  WriteLease Write(const std::string& id, int32_t layer = 0) {
    if (!cache_->HasSession(id)) {
      EXPECT_TRUE(cache_->CreateSession(id).ok());
    }
    std::vector<uint8_t> bytes = RandomPage(rng_);
    const WriteLease lease = WriteLayer(*cache_, id, layer, bytes);
    expected_[{id, layer}] = {lease.position + 1, std::move(bytes)};
    return lease;
  }

  const std::vector<uint8_t>& Expected(const std::string& id, int32_t layer) {
    return expected_[{id, layer}].second;
  }

  Tier TierOf(const std::string& id, int32_t layer = 0) {
    const LayerStateInfo info = DescribeLayer(*cache_, id, layer);
    EXPECT_TRUE(info.has_state) << id;
    return info.tier;
  }

  // Every remembered (session, layer) of a live session still has its
  // bytes and position.
  void ExpectStoredStatesIntact() {
    for (const auto& [key, state] : expected_) {
      if (!cache_->HasSession(key.first)) continue;
      EXPECT_EQ(*cache_->Position(key.first, key.second), state.first)
          << key.first << " layer " << key.second;
      EXPECT_EQ(ExportBytes(*cache_, key.first, key.second), state.second)
          << key.first << " layer " << key.second;
    }
    ExpectConsistent();
  }

  std::mt19937_64 rng_{424242};
  std::map<std::pair<std::string, int32_t>,
           std::pair<int64_t, std::vector<uint8_t>>>
      expected_;
};

TEST_F(TiersTest, SpillsLeastRecentlyUsedIdlePageInOrder) {
  Make(1, 3, 4);
  EXPECT_EQ(Write("s0").write_page, 0);
  EXPECT_EQ(Write("s1").write_page, 1);
  EXPECT_EQ(Write("s2").write_page, 2);
  Write("s0");  // in place; s0's page is now the most recently used
  EXPECT_THAT(IdlePagesOldestFirst(*cache_), ElementsAre(1, 2, 0));

  // Full device: each new state takes the page of the LRU idle one.
  EXPECT_EQ(Write("s3").write_page, 1);
  EXPECT_EQ(TierOf("s1"), Tier::kHost);
  EXPECT_EQ(cache_->Stats().spills, 1u);
  EXPECT_EQ(Write("s4").write_page, 2);
  EXPECT_EQ(TierOf("s2"), Tier::kHost);
  EXPECT_EQ(Write("s5").write_page, 0);
  EXPECT_EQ(TierOf("s0"), Tier::kHost);
  for (const char* id : {"s3", "s4", "s5"}) EXPECT_EQ(TierOf(id), Tier::kDevice);
  const StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.spills, 3u);
  EXPECT_EQ(stats.restores, 0u);
  EXPECT_EQ(stats.device.pages_used, 3);
  EXPECT_EQ(stats.host.pages_used, 3);
  EXPECT_EQ(stats.host.bytes_used, 3 * static_cast<int64_t>(kPageBytes));
  EXPECT_EQ(cache_->DescribeSession("s1")->bytes, static_cast<int64_t>(kPageBytes));
  ExpectStoredStatesIntact();
}

TEST_F(TiersTest, WriteToHostStateRestoresItExactly) {
  Make(1, 3, 4);
  for (const char* id : {"s0", "s1", "s2", "s3", "s4", "s5"}) Write(id);
  // s0, s1, s2 were spilled (in that order) to host pages 0, 1, 2.
  ASSERT_EQ(TierOf("s1"), Tier::kHost);
  EXPECT_THAT(IdlePagesOldestFirst(*cache_), ElementsAre(0, 1, 2));  // s3 s4 s5
  const int to_device = backend_.copies_to_device;

  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("s1", 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  // s3 (page 0, the LRU) went to host page 3 and s1 came back into page 0,
  // private, so the kernel writes it in place.
  EXPECT_EQ(lease->read_page, 0);
  EXPECT_EQ(lease->write_page, 0);
  EXPECT_EQ(lease->position, 1);
  EXPECT_EQ(ReadDevicePage(cache_->pool(), 0), Expected("s1", 0));
  EXPECT_EQ(backend_.copies_to_device, to_device + 1);
  EXPECT_EQ(TierOf("s1"), Tier::kDevice);
  EXPECT_EQ(TierOf("s3"), Tier::kHost);
  StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.restores, 1u);
  EXPECT_EQ(stats.spills, 4u);
  EXPECT_EQ(stats.host.pages_used, 3);  // s1's host page is free again
  EXPECT_EQ(stats.device.pages_pinned, 1);
  cache_->Abort(*lease);
  ExpectStoredStatesIntact();

  // Round trips through the host tier keep every byte: cycle all six.
  for (int round = 0; round < 3; ++round) {
    for (const char* id : {"s0", "s1", "s2", "s3", "s4", "s5"}) {
      absl::StatusOr<WriteLease> next = cache_->AcquireForWrite(id, 0);
      ASSERT_TRUE(next.ok()) << next.status();
      EXPECT_EQ(ReadDevicePage(cache_->pool(), next->read_page),
                Expected(id, 0))
          << id;
      cache_->Abort(*next);
    }
  }
  EXPECT_GT(cache_->Stats().restores, 10u);
  ExpectStoredStatesIntact();
}

TEST_F(TiersTest, SharedHostStateIsRestoredThenCopiedOnWrite) {
  Make(1, 3, 3);
  Write("a");  // page 0
  ASSERT_TRUE(cache_->ForkSession("a", "b").ok());
  expected_[{"b", 0}] = expected_[{"a", 0}];
  Write("c");  // 1
  Write("d");  // 2
  Write("e");  // spills a/b's shared page
  ASSERT_EQ(TierOf("a"), Tier::kHost);
  EXPECT_EQ(TierOf("b"), Tier::kHost);  // one state, seen by both
  EXPECT_EQ(DescribeLayer(*cache_, "b", 0).shared_with, 1);
  EXPECT_EQ(cache_->Stats().host.pages_used, 1);

  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("b", 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  // Restored into c's page (1, the LRU), then d's page (2) for the write.
  EXPECT_EQ(lease->read_page, 1);
  EXPECT_EQ(lease->write_page, 2);
  EXPECT_EQ(ReadDevicePage(cache_->pool(), lease->read_page),
            Expected("a", 0));
  EXPECT_EQ(TierOf("a"), Tier::kDevice);
  EXPECT_EQ(TierOf("c"), Tier::kHost);
  EXPECT_EQ(TierOf("d"), Tier::kHost);
  const std::vector<uint8_t> written = RandomPage(rng_);
  WriteDevicePage(cache_->pool(), lease->write_page, written);
  cache_->Commit(*lease, 2);
  expected_[{"b", 0}] = {2, written};
  const StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.cow_copies, 1u);
  EXPECT_EQ(stats.restores, 1u);
  EXPECT_EQ(stats.spills, 3u);
  EXPECT_EQ(DescribeLayer(*cache_, "a", 0).shared_with, 0);
  ExpectStoredStatesIntact();
}

TEST_F(TiersTest, ExportOfHostStateReadsTheHostCopy) {
  Make(2, 1, 2);
  Write("a", 1);
  Write("b", 0);  // spills a
  ASSERT_EQ(TierOf("a", 1), Tier::kHost);
  const int to_device = backend_.copies_to_device;
  EXPECT_EQ(ExportBytes(*cache_, "a", 1), Expected("a", 1));
  EXPECT_EQ(TierOf("a", 1), Tier::kHost);
  EXPECT_EQ(cache_->Stats().restores, 0u);
  EXPECT_EQ(backend_.copies_to_device, to_device);
  // An import over a private host state overwrites it where it is.
  const std::vector<uint8_t> imported = RandomPage(rng_);
  ASSERT_TRUE(cache_->ImportLayer("a", 1, {12, imported}).ok());
  expected_[{"a", 1}] = {12, imported};
  EXPECT_EQ(TierOf("a", 1), Tier::kHost);
  EXPECT_EQ(cache_->Stats().host.pages_used, 1);
  ExpectStoredStatesIntact();
}

TEST_F(TiersTest, PinnedPagesAreNeverSpilled) {
  Make(1, 2, 2);
  ASSERT_TRUE(cache_->CreateSession("busy").ok());
  absl::StatusOr<WriteLease> fresh = cache_->AcquireForWrite("busy", 0);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->write_page, 0);
  Write("idle");  // page 1
  // The next write spills "idle", not the page being written.
  EXPECT_EQ(Write("x").write_page, 1);
  EXPECT_EQ(TierOf("idle"), Tier::kHost);
  const std::vector<uint8_t> bytes = RandomPage(rng_);
  WriteDevicePage(cache_->pool(), fresh->write_page, bytes);
  cache_->Commit(*fresh, 1);
  expected_[{"busy", 0}] = {1, bytes};

  // An in-place lease pins the state itself: "x" is the only idle page.
  absl::StatusOr<WriteLease> in_place = cache_->AcquireForWrite("busy", 0);
  ASSERT_TRUE(in_place.ok());
  EXPECT_THAT(IdlePagesOldestFirst(*cache_), ElementsAre(1));  // x only
  EXPECT_EQ(Write("y").write_page, 1);
  EXPECT_EQ(TierOf("x"), Tier::kHost);
  EXPECT_EQ(TierOf("busy"), Tier::kDevice);
  cache_->Abort(*in_place);
  ExpectStoredStatesIntact();
}

TEST_F(TiersTest, AllDevicePagesPinnedIsResourceExhaustedAndChangesNothing) {
  Make(2, 2, 4);
  Write("a");
  ASSERT_TRUE(cache_->CreateSession("b").ok());
  absl::StatusOr<WriteLease> la = cache_->AcquireForWrite("a", 0);  // in place
  absl::StatusOr<WriteLease> lb = cache_->AcquireForWrite("b", 0);  // fresh
  ASSERT_TRUE(la.ok() && lb.ok());
  const StateCacheStats before = cache_->Stats();
  EXPECT_EQ(before.device.pages_pinned, 2);
  const int copies = backend_.total_copies();

  absl::StatusOr<WriteLease> blocked = cache_->AcquireForWrite("a", 1);
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(blocked.status().message(), HasSubstr("device 2/2 pages used (2 pinned"));
  EXPECT_THAT(blocked.status().message(), HasSubstr("host 0/4"));
  ExpectSameStats(cache_->Stats(), before);
  EXPECT_EQ(backend_.total_copies(), copies);
  // Eviction cannot help either: the only other session is being written.
  Make(2, 2, 4, /*evict=*/true);
  Write("a");
  ASSERT_TRUE(cache_->CreateSession("b").ok());
  la = cache_->AcquireForWrite("a", 0);
  lb = cache_->AcquireForWrite("b", 0);
  ASSERT_TRUE(la.ok() && lb.ok());
  ASSERT_TRUE(cache_->CreateSession("c").ok());
  EXPECT_EQ(cache_->AcquireForWrite("c", 0).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache_->Stats().evictions, 0u);
  EXPECT_THAT(cache_->ListSessions(), ElementsAre("a", "b", "c"));
  cache_->Abort(*la);
  cache_->Abort(*lb);
  ExpectStoredStatesIntact();
}

// a, b on the host tier, c, d on the device: both tiers full.
class FullTiersTest : public TiersTest {
 protected:
  void Fill(bool evict) {
    Make(2, 2, 2, evict);
    for (const char* id : {"a", "b", "c", "d"}) Write(id);
    ASSERT_EQ(TierOf("a"), Tier::kHost);
    ASSERT_EQ(TierOf("b"), Tier::kHost);
    ASSERT_EQ(TierOf("c"), Tier::kDevice);
    ASSERT_EQ(TierOf("d"), Tier::kDevice);
  }
};

TEST_F(FullTiersTest, EveryRequestForAPageFailsAndChangesNothing) {
  Fill(/*evict=*/false);
  ASSERT_TRUE(cache_->CreateSession("e").ok());
  const StateCacheStats before = cache_->Stats();
  const int copies = backend_.total_copies();
  const std::vector<int32_t> lru = IdlePagesOldestFirst(*cache_);

  // A new state, a restore, a copy-on-write and an import all need a page.
  absl::StatusOr<WriteLease> fresh = cache_->AcquireForWrite("e", 0);
  EXPECT_EQ(fresh.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(fresh.status().message(), HasSubstr("eviction disabled"));
  // A shared host state swaps up, then needs a page of its own.
  ASSERT_TRUE(cache_->ForkSession("a", "a2").ok());
  EXPECT_EQ(cache_->AcquireForWrite("a2", 0).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache_->AcquireForWrite("c", 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(cache_->ForkSession("d", "d2").ok());
  EXPECT_EQ(cache_->AcquireForWrite("d2", 0).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache_->ImportLayer("e", 1, {4, RandomPage(rng_)}).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(backend_.total_copies(), copies);  // no partial spill
  StateCacheStats after = cache_->Stats();
  after.sessions -= 2;  // a2, d2
  ExpectSameStats(after, before);
  EXPECT_EQ(IdlePagesOldestFirst(*cache_), lru);
  EXPECT_FALSE(DescribeLayer(*cache_, "e", 0).has_state);
  EXPECT_FALSE(DescribeLayer(*cache_, "e", 1).has_state);
  EXPECT_EQ(DescribeLayer(*cache_, "d2", 0).shared_with, 1);
  EXPECT_EQ(*cache_->Position("e", 1), 0);
  ExpectStoredStatesIntact();

  // What needs no net new page still works: an in-place write of a private
  // state, and one of a private host state (it swaps with the LRU idle
  // device state, d).
  Write("c");
  Write("b");
  EXPECT_EQ(TierOf("b"), Tier::kDevice);
  EXPECT_EQ(TierOf("d"), Tier::kHost);
  EXPECT_EQ(cache_->Stats().evictions, 0u);
  // And closing sessions makes room again.
  ASSERT_TRUE(cache_->CloseSession("a").ok());
  ASSERT_TRUE(cache_->CloseSession("a2").ok());
  Write("e");
  ExpectStoredStatesIntact();
}

// Issue 21, defect 2: with both tiers full, sessions on the host tier keep
// advancing by swapping with idle device states; leased pages never move.
TEST_F(TiersTest, BothTiersFullHostSessionsSwapAndKeepAdvancing) {
  Make(1, 4, 4);
  const std::vector<std::string> ids = {"s0", "s1", "s2", "s3",
                                        "s4", "s5", "s6", "s7"};
  for (const std::string& id : ids) Write(id);
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(TierOf(ids[i]), i < 4 ? Tier::kHost : Tier::kDevice) << ids[i];
  }
  EXPECT_THAT(IdlePagesOldestFirst(*cache_), ElementsAre(0, 1, 2, 3));

  // s0 comes up into page 0 and s4, the LRU idle state, goes down.
  EXPECT_EQ(Write("s0").write_page, 0);
  EXPECT_EQ(TierOf("s0"), Tier::kDevice);
  EXPECT_EQ(TierOf("s4"), Tier::kHost);
  // s5 (now the LRU) is being written: s1 swaps with s6 instead.
  absl::StatusOr<WriteLease> running = cache_->AcquireForWrite("s5", 0);
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->write_page, 1);
  EXPECT_EQ(Write("s1").write_page, 2);
  EXPECT_EQ(TierOf("s5"), Tier::kDevice);
  EXPECT_EQ(TierOf("s6"), Tier::kHost);
  const std::vector<uint8_t> bytes = RandomPage(rng_);
  WriteDevicePage(cache_->pool(), running->write_page, bytes);
  cache_->Commit(*running, running->position + 1);
  expected_[{"s5", 0}] = {running->position + 1, bytes};
  ExpectStoredStatesIntact();

  // Every session advances, round after round, wherever its page was.
  for (int round = 0; round < 3; ++round) {
    for (const std::string& id : ids) Write(id);
  }
  const StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(stats.sessions, 8);
  EXPECT_EQ(stats.device.pages_used, 4);
  EXPECT_EQ(stats.host.pages_used, 4);
  // Two swaps above, then LRU over a cycle of 8 sessions on 4 device pages:
  // 6 misses in the first round (s0, s1 were up), 8 in each after.
  EXPECT_EQ(stats.restores, 2u + 6u + 8u + 8u);
  ExpectStoredStatesIntact();
}

TEST_F(FullTiersTest, EvictionDropsTheLeastRecentlyUsedSession) {
  Fill(/*evict=*/true);
  Write("e");
  // "a" (host) was the LRU: dropping it let "c" spill into its host page.
  EXPECT_THAT(cache_->ListSessions(), ElementsAre("b", "c", "d", "e"));
  EXPECT_EQ(TierOf("c"), Tier::kHost);
  StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.sessions, 4);
  ExpectStoredStatesIntact();

  // A write to the host session "b" needs no net new page: it swaps with
  // the LRU idle device state ("d"), and nothing is evicted.
  Write("b");
  EXPECT_THAT(cache_->ListSessions(), ElementsAre("b", "c", "d", "e"));
  EXPECT_EQ(TierOf("b"), Tier::kDevice);
  EXPECT_EQ(TierOf("d"), Tier::kHost);
  stats = cache_->Stats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.restores, 1u);
  ExpectStoredStatesIntact();
}

TEST_F(TiersTest, EvictionNeverTakesASessionWithAWriteInFlight) {
  Make(2, 3, 1, /*evict=*/true);
  Write("a", 0);  // page 0
  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("a", 1);  // 1
  ASSERT_TRUE(lease.ok());
  Write("b");  // page 2
  Write("c");  // spills a's layer 0 (the LRU idle page) to the host tier
  ASSERT_EQ(TierOf("a", 0), Tier::kHost);
  // Full; "a" is the LRU session but is being written: "b" goes.
  Write("d");
  EXPECT_THAT(cache_->ListSessions(), ElementsAre("a", "c", "d"));
  EXPECT_EQ(cache_->Stats().evictions, 1u);
  const std::vector<uint8_t> bytes = RandomPage(rng_);
  WriteDevicePage(cache_->pool(), lease->write_page, bytes);
  cache_->Commit(*lease, 1);
  expected_[{"a", 1}] = {1, bytes};
  ExpectStoredStatesIntact();
}

TEST_F(TiersTest, EvictionKeepsForksWhoseSharedPagesItWouldNotFree) {
  Make(2, 2, 0, /*evict=*/true);  // no host tier: only eviction makes room
  Write("x");                      // page 0
  ASSERT_TRUE(cache_->ForkSession("x", "y").ok());  // recency: y, x
  expected_[{"y", 0}] = expected_[{"x", 0}];
  Write("b");  // page 1; recency: y, x, b
  // x needs a page for layer 1: the plan takes y (LRU), which frees nothing
  // while x holds page 0, then b; y is given back, only b goes.
  Write("x", 1);
  EXPECT_THAT(cache_->ListSessions(), ElementsAre("x", "y"));
  EXPECT_EQ(cache_->Stats().evictions, 1u);
  ExpectStoredStatesIntact();

  // A new session: y alone still frees nothing, x must go (which frees its
  // private layer-1 page), and with x gone y is not needed: y is kept.
  Write("z");
  EXPECT_THAT(cache_->ListSessions(), ElementsAre("y", "z"));
  EXPECT_EQ(cache_->Stats().evictions, 2u);
  ExpectStoredStatesIntact();
}

TEST_F(TiersTest, FailedSpillCopyIsAnErrorThatLosesNothing) {
  Make(1, 2, 2);
  Write("a");
  Write("b");
  ASSERT_TRUE(cache_->CreateSession("c").ok());
  const StateCacheStats before = cache_->Stats();
  backend_.fail_next_copy_to_host = true;
  EXPECT_EQ(cache_->AcquireForWrite("c", 0).status().code(),
            absl::StatusCode::kInternal);
  ExpectSameStats(cache_->Stats(), before);
  EXPECT_EQ(TierOf("a"), Tier::kDevice);
  ExpectStoredStatesIntact();
  Write("c");  // works once the backend does
  EXPECT_EQ(TierOf("a"), Tier::kHost);
  ExpectStoredStatesIntact();
}

TEST_F(TiersTest, FailedRestoreCopyLeavesStateOnHost) {
  Make(1, 1, 2);
  Write("a");
  Write("b");  // spills a
  backend_.fail_next_copy_to_device = true;
  EXPECT_EQ(cache_->AcquireForWrite("a", 0).status().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(TierOf("a"), Tier::kHost);
  EXPECT_EQ(cache_->Stats().device.pages_pinned, 0);
  ExpectStoredStatesIntact();
  Write("a");
  EXPECT_EQ(TierOf("a"), Tier::kDevice);
  ExpectStoredStatesIntact();
}

TEST_F(TiersTest, StatsCountEveryTier) {
  Make(2, 3, 2);
  Write("a", 0);
  Write("a", 1);
  ASSERT_TRUE(cache_->ForkSession("a", "b").ok());
  Write("c", 0);
  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("b", 1);  // spills
  ASSERT_TRUE(lease.ok());
  const StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.sessions, 3);
  EXPECT_EQ(stats.device.pages_total, 3);
  EXPECT_EQ(stats.device.pages_used, 3);
  EXPECT_EQ(stats.device.pages_pinned, 2);  // b's read page and write page
  EXPECT_EQ(stats.device.bytes_used, 3 * static_cast<int64_t>(kPageBytes));
  EXPECT_EQ(stats.host.pages_total, 2);
  EXPECT_EQ(stats.host.pages_used, 1);
  EXPECT_EQ(stats.host.pages_pinned, 0);
  EXPECT_EQ(stats.host.bytes_used, static_cast<int64_t>(kPageBytes));
  EXPECT_EQ(stats.spills, 1u);
  EXPECT_EQ(stats.cow_copies, 0u);  // counted at Commit
  cache_->Commit(*lease, 2);
  EXPECT_EQ(cache_->Stats().cow_copies, 1u);
  EXPECT_EQ(cache_->Stats().device.pages_pinned, 0);
}

}  // namespace
}  // namespace gdn
