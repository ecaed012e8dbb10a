// Kept states (prefix reuse) in the paged state cache
// (paged_state_cache_kept.cc): a keeping write's pages, forks at every kept
// position and the refused ones, the exact order kept states are dropped in
// when a write needs room, and what is never dropped.
#include <random>
#include <string>
#include <tuple>
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
using Key = std::tuple<std::string, int32_t, int64_t>;

class KeptTest : public ::testing::Test, public FakeCache {
 protected:
  void SetUp() override { Make(SmallConfig(2, 16, 0)); }

  PagedStateCache& paged() { return dynamic_cast<PagedStateCache&>(*cache_); }

  // A write of `tokens` keeping `keep`; the stand-in kernel writes a random
  // page per kept position and the final state. Returns {kept..., final}.
  std::vector<std::vector<uint8_t>> Write(const std::string& s, int32_t layer, int64_t tokens,
                                          const std::vector<int64_t>& keep) {
    absl::StatusOr<WriteLease> lease = cache_->AcquireForWriteKeeping(s, layer, keep);
    EXPECT_TRUE(lease.ok()) << lease.status();
    if (!lease.ok()) return {};
    EXPECT_EQ(lease->keep_pages.size(), keep.size());
    std::vector<std::vector<uint8_t>> pages;
    for (int32_t page : lease->keep_pages) {
      pages.push_back(RandomPage(rng_));
      WriteDevicePage(cache_->pool(), page, pages.back());
    }
    pages.push_back(RandomPage(rng_));
    WriteDevicePage(cache_->pool(), lease->write_page, pages.back());
    cache_->Commit(*lease, lease->position + tokens);
    return pages;
  }

  std::mt19937_64 rng_{20261203};
};

TEST_F(KeptTest, ForkAtEveryKeptPosition) {
  ASSERT_TRUE(cache_->CreateSession("p").ok());
  const auto l0 = Write("p", 0, 300, {64, 128, 192, 256});
  const auto l1 = Write("p", 1, 300, {64, 128, 192, 256});
  EXPECT_THAT(DescribeLayer(*cache_, "p", 0).kept_positions, ElementsAre(64, 128, 192, 256));
  EXPECT_EQ(cache_->Stats().kept_states, 8);
  EXPECT_EQ(cache_->Stats().device.pages_used, 10);
  ExpectConsistent();
  for (int m = 0; m < 4; ++m) {
    const std::string child = absl::StrCat("c", m);
    ASSERT_TRUE(cache_->ForkSessionAt("p", child, 64 * (m + 1)).ok());
    EXPECT_EQ(*cache_->Position(child, 0), 64 * (m + 1));
    EXPECT_EQ(ExportBytes(*cache_, child, 0), l0[m]);
    EXPECT_EQ(ExportBytes(*cache_, child, 1), l1[m]);
    EXPECT_TRUE(DescribeLayer(*cache_, child, 0).kept_positions.empty());
  }
  // At the current position too, and the child's write leaves the kept page.
  ASSERT_TRUE(cache_->ForkSessionAt("p", "now", 300).ok());
  EXPECT_EQ(ExportBytes(*cache_, "now", 1), l1[4]);
  WriteLayer(*cache_, "c1", 0, RandomPage(rng_), 5);
  EXPECT_EQ(ExportBytes(*cache_, "c2", 0), l0[2]);
  ASSERT_TRUE(cache_->ForkSessionAt("p", "again", 128).ok());
  EXPECT_EQ(ExportBytes(*cache_, "again", 0), l0[1]);
  EXPECT_EQ(cache_->Stats().device.pages_used, 11);  // c1's write: one page
  ExpectConsistent();
}

TEST_F(KeptTest, OtherPositionsAreRefusedListingTheAvailableOnes) {
  ASSERT_TRUE(cache_->CreateSession("p").ok());
  Write("p", 0, 300, {64, 128, 192, 256});
  Write("p", 1, 200, {128});
  for (int64_t bad : {0, 64, 100, 200, 300}) {
    const absl::Status st = cache_->ForkSessionAt("p", "c", bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << bad;
    EXPECT_THAT(st.message(), HasSubstr("positions available on every layer: [128]"));
  }
  EXPECT_FALSE(cache_->HasSession("c"));
  EXPECT_EQ(cache_->ForkSessionAt("x", "c", 128).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(cache_->CreateSession("c").ok());
  EXPECT_EQ(cache_->ForkSessionAt("p", "c", 128).code(), absl::StatusCode::kAlreadyExists);
  // Bad keeps change nothing.
  EXPECT_EQ(cache_->AcquireForWriteKeeping("p", 1, {200}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->AcquireForWriteKeeping("p", 1, {300, 264}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ExpectConsistent();
  EXPECT_EQ(cache_->Stats().device.pages_pinned, 0);
}

// With no room (no host tier here), the least recently used kept state
// whose page that frees goes first; one shared with a fork is skipped until
// the fork lets go; when nothing can go, the write fails. Close and import
// drop a layer's kept states.
TEST_F(KeptTest, KeptStatesAreDroppedLeastRecentlyUsedFirst) {
  Make(SmallConfig(1, 8, 0));
  for (const char* id : {"a", "b", "c", "d", "e", "g", "h", "i"}) {
    ASSERT_TRUE(cache_->CreateSession(id).ok());
  }
  Write("a", 0, 100, {64});  // 2 pages
  ASSERT_TRUE(cache_->ForkSessionAt("a", "f", 64).ok());  // a@64 shared with f
  Write("b", 0, 200, {64, 128});  // 3 pages: 5 of 8
  for (const char* id : {"c", "d", "e"}) WriteLayer(*cache_, id, 0, RandomPage(rng_));
  EXPECT_EQ(cache_->Stats().device.pages_used, 8);
  EXPECT_THAT(paged().KeptOldestFirst(),
              ElementsAre(Key{"a", 0, 64}, Key{"b", 0, 64}, Key{"b", 0, 128}));
  WriteLayer(*cache_, "g", 0, RandomPage(rng_));  // b@64 goes, a@64 (shared) stays
  EXPECT_EQ(cache_->Stats().kept_dropped, 1u);
  EXPECT_THAT(paged().KeptOldestFirst(), ElementsAre(Key{"a", 0, 64}, Key{"b", 0, 128}));
  WriteLayer(*cache_, "h", 0, RandomPage(rng_));  // b@128
  EXPECT_THAT(paged().KeptOldestFirst(), ElementsAre(Key{"a", 0, 64}));
  const StateCacheStats before = cache_->Stats();
  const absl::Status full = cache_->AcquireForWrite("i", 0).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  ExpectSameStats(before, cache_->Stats());
  EXPECT_EQ(cache_->Stats().kept_states, 1);
  ASSERT_TRUE(cache_->CloseSession("f").ok());  // a@64 is a's alone now
  WriteLayer(*cache_, "i", 0, RandomPage(rng_));
  EXPECT_EQ(cache_->Stats().kept_dropped, 3u);
  EXPECT_EQ(cache_->Stats().kept_states, 0);
  ExpectConsistent();

  ASSERT_TRUE(cache_->CloseSession("h").ok());  // a page for the next kept state
  Write("i", 0, 100, {64});
  EXPECT_EQ(cache_->Stats().kept_states, 1);
  StateCache::LayerState imported;
  imported.position = 9;
  imported.bytes = RandomPage(rng_);
  ASSERT_TRUE(cache_->ImportLayer("i", 0, imported).ok());
  EXPECT_EQ(cache_->Stats().kept_states, 0);
  Write("c", 0, 100, {64});
  ASSERT_TRUE(cache_->CloseSession("c").ok());
  EXPECT_EQ(cache_->Stats().kept_states, 0);
  ExpectConsistent();
}

}  // namespace
}  // namespace gdn
