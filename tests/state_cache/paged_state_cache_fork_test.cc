// Copy-on-write forks of the paged state cache: a fork shares every page,
// the first write to a shared page copies it (whichever side writes), an
// abort keeps the sharing, chains of forks and closed parents.
#include "state_cache/paged_state_cache.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/state_cache/cache_test_util.h"
#include "tests/state_cache/fake_backend.h"

namespace gdn {
namespace {

using namespace testing_cache;  // NOLINT: test helpers

class ForkTest : public SmallCacheTest {};

TEST_F(ForkTest, ForkSharesEveryPageWithoutCopying) {
  ASSERT_TRUE(cache_->CreateSession("parent").ok());
  std::vector<std::vector<uint8_t>> bytes;
  for (int32_t layer = 0; layer < 2; ++layer) {  // layer 2 stays zero
    bytes.push_back(RandomPage(rng_));
    WriteLayer(*cache_, "parent", layer, bytes.back(), 3 + layer);
  }
  const int copies = backend_.total_copies();
  const StateCacheStats before = cache_->Stats();
  ASSERT_TRUE(cache_->ForkSession("parent", "child").ok());
  EXPECT_EQ(backend_.total_copies(), copies);
  const StateCacheStats after = cache_->Stats();
  EXPECT_EQ(after.device.pages_used, before.device.pages_used);  // counted once
  EXPECT_EQ(after.sessions, 2);
  for (int32_t layer = 0; layer < 2; ++layer) {
    for (const char* id : {"parent", "child"}) {
      const LayerStateInfo info = DescribeLayer(*cache_, id, layer);
      EXPECT_TRUE(info.has_state);
      EXPECT_EQ(info.shared_with, 1) << id << " layer " << layer;
      EXPECT_EQ(info.position, 3 + layer);
    }
    EXPECT_EQ(ExportBytes(*cache_, "child", layer), bytes[layer]);
  }
  EXPECT_FALSE(DescribeLayer(*cache_, "child", 2).has_state);
  EXPECT_EQ(cache_->DescribeSession("child")->bytes,
            2 * static_cast<int64_t>(kPageBytes));
  EXPECT_EQ(cache_->ForkSession("parent", "child").code(),
            absl::StatusCode::kAlreadyExists);
  ExpectConsistent();
}

// The first write of either side of a fork reads the shared page and writes
// a new one; the other side keeps its bytes.
class ForkWriteTest : public ForkTest,
                      public ::testing::WithParamInterface<bool> {};

TEST_P(ForkWriteTest, CopyOnWriteLeavesOtherSideIntact) {
  const bool child_writes = GetParam();
  ASSERT_TRUE(cache_->CreateSession("parent").ok());
  const std::vector<uint8_t> shared = RandomPage(rng_);
  const int32_t shared_page = WriteLayer(*cache_, "parent", 0, shared, 7).write_page;
  ASSERT_TRUE(cache_->ForkSession("parent", "child").ok());
  const std::string writer = child_writes ? "child" : "parent";
  const std::string reader = child_writes ? "parent" : "child";

  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite(writer, 0);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->read_page, shared_page);
  EXPECT_NE(lease->write_page, shared_page);
  EXPECT_EQ(lease->write_page, 1);  // the lowest free page
  EXPECT_EQ(lease->position, 7);
  EXPECT_EQ(cache_->Stats().device.pages_pinned, 2);  // read and write pages
  EXPECT_EQ(ReadDevicePage(cache_->pool(), lease->read_page), shared);
  const std::vector<uint8_t> written = RandomPage(rng_);
  WriteDevicePage(cache_->pool(), lease->write_page, written);
  cache_->Commit(*lease, 8);

  EXPECT_EQ(ExportBytes(*cache_, reader, 0), shared);
  EXPECT_EQ(ExportBytes(*cache_, writer, 0), written);
  EXPECT_EQ(*cache_->Position(reader, 0), 7);
  EXPECT_EQ(*cache_->Position(writer, 0), 8);
  EXPECT_EQ(DescribeLayer(*cache_, reader, 0).shared_with, 0);
  EXPECT_EQ(DescribeLayer(*cache_, writer, 0).shared_with, 0);
  const StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.cow_copies, 1u);
  EXPECT_EQ(stats.device.pages_used, 2);
  EXPECT_EQ(stats.device.pages_pinned, 0);

  // Both sides are private now: the next writes are in place.
  for (const std::string& id : {writer, reader}) {
    absl::StatusOr<WriteLease> next = cache_->AcquireForWrite(id, 0);
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(next->read_page, next->write_page);
    cache_->Abort(*next);
  }
  EXPECT_EQ(cache_->Stats().cow_copies, 1u);
  ExpectConsistent();
}

INSTANTIATE_TEST_SUITE_P(EitherSide, ForkWriteTest, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "ChildWrites" : "ParentWrites";
                         });

TEST_F(ForkTest, AbortOfCopyOnWriteKeepsSharing) {
  ASSERT_TRUE(cache_->CreateSession("a").ok());
  const std::vector<uint8_t> shared = RandomPage(rng_);
  const int32_t page = WriteLayer(*cache_, "a", 0, shared).write_page;
  ASSERT_TRUE(cache_->ForkSession("a", "b").ok());
  const StateCacheStats before = cache_->Stats();
  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("b", 0);
  ASSERT_TRUE(lease.ok());
  WriteDevicePage(cache_->pool(), lease->write_page, RandomPage(rng_));
  cache_->Abort(*lease);
  ExpectSameStats(cache_->Stats(), before);
  EXPECT_EQ(DescribeLayer(*cache_, "b", 0).shared_with, 1);
  EXPECT_EQ(ReadDevicePage(cache_->pool(), page), shared);
  EXPECT_EQ(ExportBytes(*cache_, "b", 0), shared);
  ExpectConsistent();
}

TEST_F(ForkTest, BothSidesLeasingASharedPageAtOnce) {
  ASSERT_TRUE(cache_->CreateSession("a").ok());
  const std::vector<uint8_t> shared = RandomPage(rng_);
  const int32_t page = WriteLayer(*cache_, "a", 0, shared, 2).write_page;
  ASSERT_TRUE(cache_->ForkSession("a", "b").ok());
  absl::StatusOr<WriteLease> la = cache_->AcquireForWrite("a", 0);
  absl::StatusOr<WriteLease> lb = cache_->AcquireForWrite("b", 0);
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_EQ(la->read_page, page);
  EXPECT_EQ(lb->read_page, page);
  EXPECT_NE(la->write_page, page);
  EXPECT_NE(lb->write_page, page);
  EXPECT_NE(la->write_page, lb->write_page);
  EXPECT_EQ(cache_->Stats().device.pages_pinned, 3);
  const std::vector<uint8_t> wa = RandomPage(rng_), wb = RandomPage(rng_);
  WriteDevicePage(cache_->pool(), la->write_page, wa);
  WriteDevicePage(cache_->pool(), lb->write_page, wb);
  cache_->Commit(*la, 3);
  EXPECT_EQ(ReadDevicePage(cache_->pool(), page), shared);  // b still reads it
  cache_->Commit(*lb, 4);
  EXPECT_EQ(ExportBytes(*cache_, "a", 0), wa);
  EXPECT_EQ(ExportBytes(*cache_, "b", 0), wb);
  const StateCacheStats stats = cache_->Stats();
  EXPECT_EQ(stats.device.pages_used, 2);  // the shared page is free again
  EXPECT_EQ(stats.device.pages_pinned, 0);
  EXPECT_EQ(stats.cow_copies, 2u);
  ExpectConsistent();
}

TEST_F(ForkTest, ChainOfForks) {
  ASSERT_TRUE(cache_->CreateSession("a").ok());
  const std::vector<uint8_t> root = RandomPage(rng_);
  const int32_t root_page = WriteLayer(*cache_, "a", 1, root, 10).write_page;
  ASSERT_TRUE(cache_->ForkSession("a", "b").ok());
  ASSERT_TRUE(cache_->ForkSession("b", "c").ok());
  ASSERT_TRUE(cache_->ForkSession("c", "d").ok());
  EXPECT_EQ(cache_->Stats().device.pages_used, 1);
  for (const char* id : {"a", "b", "c", "d"}) {
    EXPECT_EQ(DescribeLayer(*cache_, id, 1).shared_with, 3) << id;
    EXPECT_EQ(*cache_->Position(id, 1), 10);
  }
  // c leaves, then b: a and d still share the root page.
  const std::vector<uint8_t> cb = RandomPage(rng_), bb = RandomPage(rng_);
  EXPECT_NE(WriteLayer(*cache_, "c", 1, cb).write_page, root_page);
  EXPECT_NE(WriteLayer(*cache_, "b", 1, bb).write_page, root_page);
  EXPECT_EQ(DescribeLayer(*cache_, "a", 1).shared_with, 1);
  EXPECT_EQ(DescribeLayer(*cache_, "d", 1).shared_with, 1);
  EXPECT_EQ(cache_->Stats().device.pages_used, 3);
  // A fork of a writer shares the writer's new page, not the root.
  ASSERT_TRUE(cache_->ForkSession("b", "e").ok());
  EXPECT_EQ(ExportBytes(*cache_, "e", 1), bb);
  EXPECT_EQ(DescribeLayer(*cache_, "b", 1).shared_with, 1);
  // d leaves too: a is the root page's only holder and writes in place.
  WriteLayer(*cache_, "d", 1, RandomPage(rng_));
  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("a", 1);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->read_page, root_page);
  EXPECT_EQ(lease->write_page, root_page);
  cache_->Abort(*lease);
  EXPECT_EQ(ExportBytes(*cache_, "a", 1), root);
  EXPECT_EQ(ExportBytes(*cache_, "c", 1), cb);
  EXPECT_EQ(cache_->Stats().cow_copies, 3u);
  ExpectConsistent();
}

TEST_F(ForkTest, ClosingParentKeepsChildsSharedPage) {
  ASSERT_TRUE(cache_->CreateSession("parent").ok());
  const std::vector<uint8_t> bytes = RandomPage(rng_);
  const int32_t page = WriteLayer(*cache_, "parent", 2, bytes, 5).write_page;
  ASSERT_TRUE(cache_->ForkSession("parent", "child").ok());
  ASSERT_TRUE(cache_->CloseSession("parent").ok());
  EXPECT_EQ(cache_->Stats().device.pages_used, 1);
  EXPECT_EQ(DescribeLayer(*cache_, "child", 2).shared_with, 0);
  EXPECT_EQ(ExportBytes(*cache_, "child", 2), bytes);
  EXPECT_EQ(*cache_->Position("child", 2), 5);
  // The child is the only holder: in place, no copy-on-write.
  absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite("child", 2);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->read_page, page);
  EXPECT_EQ(lease->write_page, page);
  cache_->Commit(*lease, 6);
  EXPECT_EQ(cache_->Stats().cow_copies, 0u);
  ASSERT_TRUE(cache_->CloseSession("child").ok());
  EXPECT_EQ(cache_->Stats().device.pages_used, 0);
  ExpectConsistent();
}

}  // namespace
}  // namespace gdn
