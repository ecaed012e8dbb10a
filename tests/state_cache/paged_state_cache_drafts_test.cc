// Speculative drafts in the paged state cache (paged_state_cache_drafts.cc):
// a draft lease's per-token pages, the open draft after Commit, every
// acceptance count keeping exactly the state written for it, the refused
// positions and operations, and the pages given back on every path.
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
using ::testing::HasSubstr;

class DraftTest : public ::testing::Test, public FakeCache {
 protected:
  void SetUp() override { Make(SmallConfig(2, 16, 8)); }

  // A committed draft of `tokens` on (s, layer): the stand-in kernel writes
  // a random page per token; returns them (the state after token j + 1 at j).
  std::vector<std::vector<uint8_t>> Draft(const std::string& s, int32_t layer, int32_t tokens) {
    absl::StatusOr<WriteLease> lease = cache_->AcquireForDraft(s, layer, tokens);
    EXPECT_TRUE(lease.ok()) << lease.status();
    if (!lease.ok()) return {};
    EXPECT_EQ(lease->draft_tokens, tokens);
    std::vector<std::vector<uint8_t>> states;
    for (int32_t j = 0; j < tokens; ++j) {
      states.push_back(RandomPage(rng_));
      WriteDevicePage(cache_->pool(), j + 1 < tokens ? lease->draft_pages[j] : lease->write_page,
                      states.back());
    }
    cache_->Commit(*lease, lease->position + tokens);
    return states;
  }

  std::mt19937_64 rng_{20261202};
};

TEST_F(DraftTest, LeaseHasDistinctPagesPerToken) {
  ASSERT_TRUE(cache_->CreateSession("s").ok());
  WriteLayer(*cache_, "s", 0, RandomPage(rng_), 5);
  absl::StatusOr<WriteLease> lease = cache_->AcquireForDraft("s", 0, 4);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->position, 5);
  EXPECT_EQ(lease->write_page, lease->read_page);  // private: in place
  std::vector<int32_t> pages = {lease->write_page, lease->draft_pages[0], lease->draft_pages[1],
                                lease->draft_pages[2]};
  std::sort(pages.begin(), pages.end());
  EXPECT_EQ(std::unique(pages.begin(), pages.end()), pages.end());
  EXPECT_EQ(cache_->Stats().device.pages_used, 4);  // 1 state + 3 loose
  ExpectConsistent();
  cache_->Abort(*lease);
  EXPECT_EQ(cache_->Stats().device.pages_used, 1);
  EXPECT_EQ(cache_->OpenDraftTokens("s", 0), 0);
  EXPECT_EQ(*cache_->Position("s", 0), 5);
  ExpectConsistent();
}

TEST_F(DraftTest, EveryAcceptanceKeepsItsState) {
  for (int32_t tokens = 2; tokens <= kMaxDecodeTokens; ++tokens) {
    for (int32_t accepted = 1; accepted <= tokens; ++accepted) {
      SCOPED_TRACE(absl::StrCat("T ", tokens, " k ", accepted));
      ASSERT_TRUE(cache_->CreateSession("s").ok());
      WriteLayer(*cache_, "s", 1, RandomPage(rng_), 3);
      const std::vector<std::vector<uint8_t>> states = Draft("s", 1, tokens);
      EXPECT_EQ(*cache_->Position("s", 1), 3 + tokens);
      EXPECT_EQ(cache_->OpenDraftTokens("s", 1), tokens);
      // Facts agrees with Position and OpenDraftTokens (admission's one lookup).
      EXPECT_EQ(cache_->Facts("s", 1).position, 3 + tokens);
      EXPECT_EQ(cache_->Facts("s", 1).open_draft_tokens, tokens);
      EXPECT_EQ(cache_->Facts("s", 0).open_draft_tokens, 0);
      EXPECT_EQ(DescribeLayer(*cache_, "s", 1).draft_tokens, tokens);
      EXPECT_EQ(DescribeLayer(*cache_, "s", 0).draft_tokens, 0);
      EXPECT_EQ(cache_->Stats().draft_pages, tokens - 1);
      EXPECT_EQ(cache_->Stats().device.pages_used, tokens);
      ExpectConsistent();

      ASSERT_TRUE(cache_->AcceptDraft("s", 1, 3 + accepted).ok());
      EXPECT_EQ(*cache_->Position("s", 1), 3 + accepted);
      EXPECT_EQ(cache_->OpenDraftTokens("s", 1), 0);
      EXPECT_EQ(ExportBytes(*cache_, "s", 1), states[accepted - 1]);
      EXPECT_EQ(cache_->Stats().draft_pages, 0);
      EXPECT_EQ(cache_->Stats().device.pages_used, 1);
      ExpectConsistent();
      // The accepted state is an ordinary one: the next write reads it.
      absl::StatusOr<WriteLease> next = cache_->AcquireForWrite("s", 1);
      ASSERT_TRUE(next.ok()) << next.status();
      EXPECT_EQ(next->position, 3 + accepted);
      EXPECT_EQ(ReadDevicePage(cache_->pool(), next->read_page), states[accepted - 1]);
      cache_->Abort(*next);
      ASSERT_TRUE(cache_->CloseSession("s").ok());
    }
  }
  const StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.draft_tokens, 203u);     // T drafts of T tokens: sum of T^2, T = 2..8
  EXPECT_EQ(stats.accepted_tokens, 119u);  // sum of T (T + 1) / 2
  EXPECT_EQ(stats.device.pages_used, 0);
}

TEST_F(DraftTest, PositionsOutsideTheDraftAreRefusedNamingTheRange) {
  ASSERT_TRUE(cache_->CreateSession("s").ok());
  WriteLayer(*cache_, "s", 0, RandomPage(rng_), 10);
  const std::vector<std::vector<uint8_t>> states = Draft("s", 0, 4);
  const StateCacheStats before = cache_->Stats();
  for (int64_t bad : {int64_t{10}, int64_t{9}, int64_t{15}, int64_t{0}}) {
    const absl::Status st = cache_->AcceptDraft("s", 0, bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << bad;
    EXPECT_THAT(st.message(), HasSubstr("[11, 14]"));
    EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("got position ", bad)));
  }
  ExpectSameStats(before, cache_->Stats());
  EXPECT_EQ(cache_->OpenDraftTokens("s", 0), 4);
  // Without an open draft.
  EXPECT_EQ(cache_->AcceptDraft("s", 1, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache_->AcceptDraft("x", 0, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->AcceptDraft("s", 2, 1).code(), absl::StatusCode::kOutOfRange);
  // Bad sizes.
  EXPECT_EQ(cache_->AcquireForDraft("s", 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->AcquireForDraft("s", 1, kMaxDecodeTokens + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(cache_->AcceptDraft("s", 0, 12).ok());
  EXPECT_EQ(ExportBytes(*cache_, "s", 0), states[1]);
  ExpectConsistent();
}

TEST_F(DraftTest, OpenDraftRefusesWriteExportAndFork) {
  ASSERT_TRUE(cache_->CreateSession("s").ok());
  Draft("s", 0, 3);
  for (const absl::Status& st :
       {cache_->AcquireForWrite("s", 0).status(), cache_->AcquireForDraft("s", 0, 2).status(),
        cache_->ExportLayer("s", 0).status(), cache_->ForkSession("s", "c")}) {
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(st.message(), HasSubstr("uncommitted draft of 3 tokens"));
    EXPECT_THAT(st.message(), HasSubstr("[1, 3]"));
  }
  EXPECT_FALSE(cache_->HasSession("c"));
  // The other layer is free.
  EXPECT_TRUE(cache_->ExportLayer("s", 1).ok());
  ASSERT_TRUE(cache_->AcceptDraft("s", 0, 3).ok());
  EXPECT_TRUE(cache_->ForkSession("s", "c").ok());
  ExpectConsistent();
}

TEST_F(DraftTest, ImportDiscardsAndCloseFreesAnOpenDraft) {
  ASSERT_TRUE(cache_->CreateSession("s").ok());
  Draft("s", 0, 5);
  Draft("s", 1, 2);
  EXPECT_EQ(cache_->Stats().draft_pages, 5);
  StateCache::LayerState imported;
  imported.position = 42;
  imported.bytes = RandomPage(rng_);
  ASSERT_TRUE(cache_->ImportLayer("s", 0, imported).ok());
  EXPECT_EQ(cache_->OpenDraftTokens("s", 0), 0);
  EXPECT_EQ(*cache_->Position("s", 0), 42);
  EXPECT_EQ(ExportBytes(*cache_, "s", 0), imported.bytes);
  EXPECT_EQ(cache_->Stats().draft_pages, 1);
  ExpectConsistent();
  ASSERT_TRUE(cache_->CloseSession("s").ok());
  EXPECT_EQ(cache_->Stats().draft_pages, 0);
  EXPECT_EQ(cache_->Stats().device.pages_used, 0);
  ExpectConsistent();
}

// A forked (shared) state is read, never written: the parent keeps it
// whatever the child's draft accepts.
TEST_F(DraftTest, DraftOfAForkLeavesTheSharedStateAlone) {
  ASSERT_TRUE(cache_->CreateSession("p").ok());
  const std::vector<uint8_t> shared = RandomPage(rng_);
  WriteLayer(*cache_, "p", 0, shared, 7);
  ASSERT_TRUE(cache_->ForkSession("p", "c").ok());
  const std::vector<std::vector<uint8_t>> states = Draft("c", 0, 3);
  ASSERT_TRUE(cache_->AcceptDraft("c", 0, 8).ok());
  EXPECT_EQ(ExportBytes(*cache_, "c", 0), states[0]);
  EXPECT_EQ(ExportBytes(*cache_, "p", 0), shared);
  EXPECT_EQ(DescribeLayer(*cache_, "p", 0).shared_with, 0);
  EXPECT_EQ(cache_->Stats().cow_copies, 1u);
  ExpectConsistent();
}

// Without room for every per-token page the draft is refused and nothing
// changes; the states of an open draft spill to the host tier like others
// and the accepted one comes back on its next write.
TEST_F(DraftTest, FullCacheRefusesAndDraftStatesSpill) {
  Make(SmallConfig(2, 4, 2));
  ASSERT_TRUE(cache_->CreateSession("s").ok());
  WriteLayer(*cache_, "s", 0, RandomPage(rng_), 1);
  const StateCacheStats before = cache_->Stats();
  // 1 state + 7 pages > 4 device + 2 host.
  const absl::Status full = cache_->AcquireForDraft("s", 0, 8).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  ExpectSameStats(before, cache_->Stats());
  EXPECT_EQ(cache_->Stats().device.pages_pinned, 0);
  ExpectConsistent();

  const std::vector<std::vector<uint8_t>> states = Draft("s", 0, 4);  // 4 device pages
  ASSERT_TRUE(cache_->CreateSession("t").ok());
  // Spill the two oldest idle states: the draft's last (unpinned at commit)
  // and then the state after its first token.
  WriteLayer(*cache_, "t", 0, RandomPage(rng_), 1);
  WriteLayer(*cache_, "t", 1, RandomPage(rng_), 1);
  EXPECT_EQ(cache_->Stats().spills, 2u);
  EXPECT_EQ(cache_->Stats().host.pages_used, 2);
  EXPECT_EQ(cache_->Stats().draft_pages, 3);
  ExpectConsistent();
  ASSERT_TRUE(cache_->AcceptDraft("s", 0, 2).ok());
  EXPECT_EQ(DescribeLayer(*cache_, "s", 0).tier, Tier::kHost);
  absl::StatusOr<WriteLease> next = cache_->AcquireForWrite("s", 0);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(cache_->Stats().restores, 1u);
  EXPECT_EQ(ReadDevicePage(cache_->pool(), next->read_page), states[0]);
  cache_->Abort(*next);
  ExpectConsistent();
}

}  // namespace
}  // namespace gdn
