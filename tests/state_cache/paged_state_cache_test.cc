// Sessions, write leases, export / import and expiry of the paged state
// cache, with room to spare (forks: the _fork test; tiers: the _tiers test).
#include "state_cache/paged_state_cache.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/state_cache/cache_test_util.h"
#include "tests/state_cache/fake_backend.h"

namespace gdn {
namespace {

using namespace testing_cache;  // NOLINT: test helpers
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class PagedStateCacheTest : public SmallCacheTest {};

TEST_F(PagedStateCacheTest, SessionLifecycle) {
  EXPECT_TRUE(cache_->CreateSession("b").ok());
  EXPECT_TRUE(cache_->CreateSession("a").ok());
  EXPECT_EQ(cache_->CreateSession("a").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(cache_->CreateSession("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cache_->ListSessions(), ElementsAre("a", "b"));
  EXPECT_TRUE(cache_->HasSession("a"));
  EXPECT_FALSE(cache_->HasSession("c"));
  EXPECT_EQ(cache_->Stats().sessions, 2);

  absl::StatusOr<SessionInfo> info = cache_->DescribeSession("a");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->id, "a");
  ASSERT_EQ(info->layers.size(), 3u);
  for (const LayerStateInfo& layer : info->layers) {
    EXPECT_FALSE(layer.has_state);
    EXPECT_EQ(layer.position, 0);
  }
  EXPECT_EQ(info->bytes, 0);
  EXPECT_EQ(info->last_access, clock_.Now());

  EXPECT_EQ(cache_->CloseSession("c").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(cache_->CloseSession("a").ok());
  EXPECT_FALSE(cache_->HasSession("a"));
  EXPECT_THAT(cache_->ListSessions(), ElementsAre("b"));
  EXPECT_EQ(cache_->DescribeSession("a").status().code(),
            absl::StatusCode::kNotFound);
  ExpectConsistent();
}

TEST_F(PagedStateCacheTest, BadIdsAndLayers) {
  ASSERT_TRUE(cache_->CreateSession("s").ok());
  EXPECT_EQ(cache_->Position("x", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->Position("s", 3).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(cache_->Position("s", -1).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(cache_->AcquireForWrite("x", 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->AcquireForWrite("s", 3).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(cache_->ExportLayer("x", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->ExportLayer("s", 7).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(cache_->ForkSession("x", "y").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->ForkSession("s", "s").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(cache_->ForkSession("s", "").code(), absl::StatusCode::kInvalidArgument);
  // Facts: what the one lookup of admission sees for bad ids (nothing).
  EXPECT_FALSE(cache_->Facts("x", 0).session_exists);
  for (int32_t layer : {-1, 3}) {
    const StateCache::LayerFacts facts = cache_->Facts("s", layer);
    EXPECT_TRUE(facts.session_exists);
    EXPECT_EQ(facts.position, 0);
    EXPECT_EQ(facts.open_draft_tokens, 0);
  }
}

TEST_F(PagedStateCacheTest, FirstWriteReadsZeroAndGetsLowestFreePage) {
  ASSERT_TRUE(cache_->CreateSession("a").ok());
  ASSERT_TRUE(cache_->CreateSession("b").ok());
  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("a", 1);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->session, "a");
  EXPECT_EQ(lease->layer, 1);
  EXPECT_EQ(lease->position, 0);
  EXPECT_EQ(lease->read_page, kZeroStatePage);
  EXPECT_EQ(lease->write_page, 0);
  EXPECT_EQ(cache_->Stats().device.pages_pinned, 1);
  EXPECT_EQ(cache_->Stats().device.pages_used, 1);
  const std::vector<uint8_t> bytes = RandomPage(rng_);
  WriteDevicePage(cache_->pool(), lease->write_page, bytes);
  cache_->Commit(*lease, 5);
  EXPECT_EQ(*cache_->Position("a", 1), 5);
  EXPECT_EQ(*cache_->Position("a", 0), 0);

  EXPECT_EQ(WriteLayer(*cache_, "b", 0, RandomPage(rng_)).write_page, 1);
  EXPECT_EQ(WriteLayer(*cache_, "a", 2, RandomPage(rng_)).write_page, 2);

  const LayerStateInfo layer = DescribeLayer(*cache_, "a", 1);
  EXPECT_TRUE(layer.has_state);
  EXPECT_EQ(layer.position, 5);
  EXPECT_EQ(layer.tier, Tier::kDevice);
  EXPECT_EQ(layer.shared_with, 0);
  EXPECT_EQ(cache_->DescribeSession("a")->bytes, 2 * static_cast<int64_t>(kPageBytes));
  EXPECT_EQ(ExportBytes(*cache_, "a", 1), bytes);

  const StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.device.pages_used, 3);
  EXPECT_EQ(stats.device.bytes_used, 3 * static_cast<int64_t>(kPageBytes));
  EXPECT_EQ(stats.device.pages_pinned, 0);
  EXPECT_EQ(stats.cow_copies, 0u);

  // Closing "a" frees pages 0 and 2; the lowest comes back first.
  ASSERT_TRUE(cache_->CloseSession("a").ok());
  EXPECT_EQ(cache_->Stats().device.pages_used, 1);
  ASSERT_TRUE(cache_->CreateSession("c").ok());
  EXPECT_EQ(WriteLayer(*cache_, "c", 0, RandomPage(rng_)).write_page, 0);
  EXPECT_EQ(WriteLayer(*cache_, "c", 1, RandomPage(rng_)).write_page, 2);
  ExpectConsistent();
}

TEST_F(PagedStateCacheTest, PrivateStateIsWrittenInPlace) {
  ASSERT_TRUE(cache_->CreateSession("a").ok());
  const std::vector<uint8_t> first = RandomPage(rng_);
  const WriteLease w1 = WriteLayer(*cache_, "a", 0, first, 4);
  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("a", 0);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->read_page, w1.write_page);
  EXPECT_EQ(lease->write_page, w1.write_page);
  EXPECT_EQ(lease->position, 4);
  EXPECT_EQ(ReadDevicePage(cache_->pool(), lease->read_page), first);
  EXPECT_EQ(cache_->Stats().device.pages_pinned, 1);
  const std::vector<uint8_t> second = RandomPage(rng_);
  WriteDevicePage(cache_->pool(), lease->write_page, second);
  cache_->Commit(*lease, 9);
  EXPECT_EQ(*cache_->Position("a", 0), 9);
  EXPECT_EQ(ExportBytes(*cache_, "a", 0), second);
  const StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.device.pages_used, 1);
  EXPECT_EQ(stats.device.pages_pinned, 0);
  EXPECT_EQ(stats.cow_copies, 0u);
  ExpectConsistent();
}

TEST_F(PagedStateCacheTest, OneLeasePerLayerAtATime) {
  ASSERT_TRUE(cache_->CreateSession("a").ok());
  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("a", 0);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(cache_->AcquireForWrite("a", 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<WriteLease> other = cache_->AcquireForWrite("a", 1);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->write_page, lease->write_page);
  // A session being written cannot be closed, forked, exported or imported
  // on that layer (the kernel may write in place).
  EXPECT_EQ(cache_->CloseSession("a").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache_->ForkSession("a", "b").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache_->ExportLayer("a", 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache_->ImportLayer("a", 1, {3, RandomPage(rng_)}).code(),
            absl::StatusCode::kFailedPrecondition);
  ExpectConsistent();
  cache_->Abort(*lease);
  cache_->Abort(*other);
  EXPECT_TRUE(cache_->CloseSession("a").ok());
  ExpectConsistent();
}

TEST_F(PagedStateCacheTest, AbortLeavesStateAsBefore) {
  ASSERT_TRUE(cache_->CreateSession("a").ok());
  // A never-written layer: the fresh page goes back, the layer stays zero.
  absl::StatusOr<WriteLease> fresh = cache_->AcquireForWrite("a", 0);
  ASSERT_TRUE(fresh.ok());
  cache_->Abort(*fresh);
  EXPECT_FALSE(DescribeLayer(*cache_, "a", 0).has_state);
  EXPECT_EQ(cache_->Stats().device.pages_used, 0);
  EXPECT_EQ(cache_->Stats().device.pages_pinned, 0);

  // A private layer: bytes, position and page as before.
  const std::vector<uint8_t> bytes = RandomPage(rng_);
  const int32_t page = WriteLayer(*cache_, "a", 0, bytes, 6).write_page;
  EXPECT_EQ(page, fresh->write_page);  // the returned page was reused
  const StateCacheStats before = cache_->Stats();
  absl::StatusOr<WriteLease> in_place = cache_->AcquireForWrite("a", 0);
  ASSERT_TRUE(in_place.ok());
  cache_->Abort(*in_place);
  EXPECT_EQ(*cache_->Position("a", 0), 6);
  EXPECT_EQ(ExportBytes(*cache_, "a", 0), bytes);
  ExpectSameStats(cache_->Stats(), before);
  // The layer can be leased again.
  absl::StatusOr<WriteLease> again = cache_->AcquireForWrite("a", 0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->write_page, page);
  cache_->Abort(*again);
  ExpectConsistent();
}

TEST_F(PagedStateCacheTest, StaleLeasesAreIgnored) {
  ASSERT_TRUE(cache_->CreateSession("a").ok());
  const std::vector<uint8_t> bytes = RandomPage(rng_);
  const WriteLease done = WriteLayer(*cache_, "a", 0, bytes, 2);
  const StateCacheStats before = cache_->Stats();
  cache_->Commit(done, 50);  // committed already
  cache_->Abort(done);
  WriteLease never = done;
  never.write_page = 5;
  cache_->Commit(never, 60);
  WriteLease gone = done;
  gone.session = "nobody";
  cache_->Commit(gone, 70);
  EXPECT_EQ(*cache_->Position("a", 0), 2);
  EXPECT_EQ(ExportBytes(*cache_, "a", 0), bytes);
  ExpectSameStats(cache_->Stats(), before);
  ExpectConsistent();
}

TEST_F(PagedStateCacheTest, ExportImportRoundTrip) {
  ASSERT_TRUE(cache_->CreateSession("src").ok());
  ASSERT_TRUE(cache_->CreateSession("dst").ok());
  absl::StatusOr<StateCache::LayerState> zero = cache_->ExportLayer("src", 0);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->position, 0);
  EXPECT_THAT(zero->bytes, IsEmpty());

  const std::vector<uint8_t> bytes = RandomPage(rng_);
  WriteLayer(*cache_, "src", 1, bytes, 33);
  absl::StatusOr<StateCache::LayerState> exported = cache_->ExportLayer("src", 1);
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ(exported->position, 33);
  EXPECT_EQ(exported->bytes, bytes);

  ASSERT_TRUE(cache_->ImportLayer("dst", 2, *exported).ok());
  EXPECT_EQ(*cache_->Position("dst", 2), 33);
  EXPECT_EQ(ExportBytes(*cache_, "dst", 2), bytes);
  EXPECT_EQ(DescribeLayer(*cache_, "dst", 2).shared_with, 0);  // its own page
  EXPECT_EQ(cache_->Stats().device.pages_used, 2);

  // Importing over a private state overwrites it in place.
  const std::vector<uint8_t> other = RandomPage(rng_);
  ASSERT_TRUE(cache_->ImportLayer("dst", 2, {40, other}).ok());
  EXPECT_EQ(ExportBytes(*cache_, "dst", 2), other);
  EXPECT_EQ(*cache_->Position("dst", 2), 40);
  EXPECT_EQ(cache_->Stats().device.pages_used, 2);
  // The import is the state the next kernel reads.
  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("dst", 2);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->position, 40);
  EXPECT_EQ(ReadDevicePage(cache_->pool(), lease->read_page), other);
  cache_->Abort(*lease);
  // The source is untouched.
  EXPECT_EQ(ExportBytes(*cache_, "src", 1), bytes);
  ExpectConsistent();
}

TEST_F(PagedStateCacheTest, ImportRejectsBadInput) {
  ASSERT_TRUE(cache_->CreateSession("s").ok());
  std::vector<uint8_t> short_bytes = RandomPage(rng_, kPageBytes - 4);
  EXPECT_EQ(cache_->ImportLayer("s", 0, {1, short_bytes}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->ImportLayer("s", 0, {1, RandomPage(rng_, kPageBytes + 256)}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->ImportLayer("s", 0, {-1, RandomPage(rng_)}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->ImportLayer("none", 0, {1, RandomPage(rng_)}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->ImportLayer("s", 3, {1, RandomPage(rng_)}).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_FALSE(DescribeLayer(*cache_, "s", 0).has_state);
  EXPECT_EQ(cache_->Stats().device.pages_used, 0);
  ExpectConsistent();
}

TEST_F(PagedStateCacheTest, ImportOverSharedPageLeavesOtherHolder) {
  ASSERT_TRUE(cache_->CreateSession("a").ok());
  const std::vector<uint8_t> shared = RandomPage(rng_);
  WriteLayer(*cache_, "a", 0, shared, 3);
  ASSERT_TRUE(cache_->ForkSession("a", "b").ok());
  const std::vector<uint8_t> imported = RandomPage(rng_);
  ASSERT_TRUE(cache_->ImportLayer("b", 0, {9, imported}).ok());
  EXPECT_EQ(ExportBytes(*cache_, "a", 0), shared);
  EXPECT_EQ(ExportBytes(*cache_, "b", 0), imported);
  EXPECT_EQ(*cache_->Position("a", 0), 3);
  EXPECT_EQ(*cache_->Position("b", 0), 9);
  EXPECT_EQ(DescribeLayer(*cache_, "a", 0).shared_with, 0);
  EXPECT_EQ(cache_->Stats().device.pages_used, 2);
  // An empty import is the zero state at that position, and frees the page.
  ASSERT_TRUE(cache_->ImportLayer("b", 0, {0, {}}).ok());
  EXPECT_FALSE(DescribeLayer(*cache_, "b", 0).has_state);
  EXPECT_EQ(*cache_->Position("b", 0), 0);
  EXPECT_EQ(cache_->Stats().device.pages_used, 1);
  ExpectConsistent();
}

TEST_F(PagedStateCacheTest, ExpireIdleClosesSessionsUnusedSinceCutoff) {
  const absl::Time t0 = clock_.Now();
  ASSERT_TRUE(cache_->CreateSession("old").ok());
  WriteLayer(*cache_, "old", 0, RandomPage(rng_));
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(cache_->CreateSession("middle").ok());
  ASSERT_TRUE(cache_->CreateSession("busy").ok());
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(cache_->CreateSession("young").ok());
  WriteLayer(*cache_, "young", 0, RandomPage(rng_));
  EXPECT_EQ(cache_->DescribeSession("middle")->last_access, t0 + absl::Seconds(10));
  // "busy" has a write in flight: it is in use, never expired.
  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("busy", 1);
  ASSERT_TRUE(lease.ok());
  // ... but acquiring stamped it now; move the clock so it would be idle.
  clock_.Advance(absl::Seconds(100));

  EXPECT_THAT(cache_->ExpireIdle(t0), IsEmpty());  // strictly before the cutoff
  EXPECT_THAT(cache_->ExpireIdle(t0 + absl::Seconds(5)), ElementsAre("old"));
  EXPECT_THAT(cache_->ListSessions(), ElementsAre("busy", "middle", "young"));
  EXPECT_EQ(cache_->Stats().expired, 1u);
  EXPECT_EQ(cache_->Stats().device.pages_used, 2);  // young's + busy's lease

  EXPECT_THAT(cache_->ExpireIdle(clock_.Now()), ElementsAre("middle", "young"));
  EXPECT_THAT(cache_->ListSessions(), ElementsAre("busy"));
  cache_->Commit(*lease, 1);
  EXPECT_THAT(cache_->ExpireIdle(clock_.Now()), IsEmpty());  // just used
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(cache_->ExpireIdle(clock_.Now()), ElementsAre("busy"));
  const StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.expired, 4u);
  EXPECT_EQ(stats.sessions, 0);
  EXPECT_EQ(stats.device.pages_used, 0);
  ExpectConsistent();
}

TEST_F(PagedStateCacheTest, ClosingEverythingFreesEveryPage) {
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE(cache_->CreateSession(id).ok());
    for (int32_t layer = 0; layer < 2; ++layer) {
      WriteLayer(*cache_, id, layer, RandomPage(rng_));
    }
  }
  ASSERT_TRUE(cache_->ForkSession("b", "b2").ok());
  EXPECT_EQ(cache_->Stats().device.pages_used, 6);
  for (const char* id : {"a", "b", "c", "b2"}) {
    ASSERT_TRUE(cache_->CloseSession(id).ok());
    ExpectConsistent();
  }
  const StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.device.pages_used, 0);
  EXPECT_EQ(stats.host.pages_used, 0);
  EXPECT_EQ(stats.sessions, 0);
}

}  // namespace
}  // namespace gdn
