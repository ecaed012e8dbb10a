#include "state_cache/page_allocator.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gdn {
namespace {

TEST(PageAllocatorTest, HandsOutLowestFreeIdFirst) {
  PageAllocator pages(5);
  for (int32_t expected = 0; expected < 5; ++expected) {
    std::optional<int32_t> page = pages.Allocate();
    ASSERT_TRUE(page.has_value());
    EXPECT_EQ(*page, expected);
    EXPECT_EQ(pages.RefCount(*page), 1);
  }
  EXPECT_FALSE(pages.Allocate().has_value());
  EXPECT_EQ(pages.num_used(), 5);
  EXPECT_EQ(pages.num_free(), 0);

  // Freed out of order, refilled from the bottom.
  EXPECT_TRUE(pages.Release(3));
  EXPECT_TRUE(pages.Release(1));
  EXPECT_TRUE(pages.Release(4));
  EXPECT_EQ(pages.Allocate(), 1);
  EXPECT_EQ(pages.Allocate(), 3);
  EXPECT_EQ(pages.Allocate(), 4);
  EXPECT_FALSE(pages.Allocate().has_value());
}

TEST(PageAllocatorTest, SharedPageFreesAtLastRelease) {
  PageAllocator pages(3);
  const int32_t page = *pages.Allocate();
  pages.AddRef(page);
  pages.AddRef(page);
  EXPECT_EQ(pages.RefCount(page), 3);
  EXPECT_FALSE(pages.Release(page));
  EXPECT_FALSE(pages.Release(page));
  EXPECT_TRUE(pages.IsAllocated(page));
  EXPECT_EQ(pages.num_used(), 1);
  EXPECT_TRUE(pages.Release(page));
  EXPECT_FALSE(pages.IsAllocated(page));
  EXPECT_EQ(pages.num_used(), 0);
  EXPECT_EQ(pages.Allocate(), page);
}

TEST(PageAllocatorTest, OutOfRangeIdsAreNotAllocated) {
  PageAllocator pages(2);
  EXPECT_FALSE(pages.IsValid(-1));
  EXPECT_FALSE(pages.IsValid(2));
  EXPECT_EQ(pages.RefCount(-1), 0);
  EXPECT_EQ(pages.RefCount(7), 0);
}

TEST(PageAllocatorTest, EmptyAllocatorHasNothing) {
  PageAllocator pages(0);
  EXPECT_EQ(pages.num_pages(), 0);
  EXPECT_FALSE(pages.Allocate().has_value());
}

// Random allocate / add-ref / release against a model of reference counts:
// used + free = total, and every id handed out is the lowest free one.
TEST(PageAllocatorTest, RandomOperationsMatchModel) {
  constexpr int32_t kPages = 37;
  PageAllocator pages(kPages);
  std::vector<int32_t> model(kPages, 0);
  std::mt19937_64 rng(20261129);
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 3);
    if (op == 0) {
      auto lowest_free = std::find(model.begin(), model.end(), 0);
      std::optional<int32_t> page = pages.Allocate();
      if (lowest_free == model.end()) {
        ASSERT_FALSE(page.has_value());
      } else {
        ASSERT_TRUE(page.has_value());
        ASSERT_EQ(*page, lowest_free - model.begin());
        model[*page] = 1;
      }
    } else {
      const int32_t page = static_cast<int32_t>(rng() % kPages);
      if (model[page] == 0) continue;
      if (op == 1) {
        pages.AddRef(page);
        ++model[page];
      } else {
        ASSERT_EQ(pages.Release(page), --model[page] == 0);
      }
    }
    const int32_t used = static_cast<int32_t>(
        std::count_if(model.begin(), model.end(), [](int32_t c) { return c > 0; }));
    ASSERT_EQ(pages.num_used(), used);
    ASSERT_EQ(pages.num_used() + pages.num_free(), kPages);
    const int32_t probe = static_cast<int32_t>(rng() % kPages);
    ASSERT_EQ(pages.RefCount(probe), model[probe]);
  }
}

TEST(PageAllocatorDeathTest, ReleaseOfFreePageIsABug) {
  PageAllocator pages(2);
  EXPECT_DEATH(pages.Release(0), "invariant");
  EXPECT_DEATH(pages.AddRef(1), "invariant");
}

}  // namespace
}  // namespace gdn
