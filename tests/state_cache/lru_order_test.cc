#include "state_cache/lru_order.h"

#include <algorithm>
#include <list>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn {
namespace {

using ::testing::ElementsAre;

TEST(LruOrderTest, OldestIsLeastRecentlyTouched) {
  LruOrder lru(8);
  EXPECT_TRUE(lru.empty());
  EXPECT_FALSE(lru.Oldest().has_value());
  lru.Touch(5);
  lru.Touch(2);
  lru.Touch(7);
  lru.Touch(5);  // 5 becomes the newest
  EXPECT_EQ(lru.size(), 3);
  EXPECT_THAT(lru.OldestFirst(), ElementsAre(2, 7, 5));
  EXPECT_EQ(lru.Oldest(), 2);
  EXPECT_EQ(lru.PopOldest(), 2);
  EXPECT_EQ(lru.PopOldest(), 7);
  EXPECT_EQ(lru.PopOldest(), 5);
  EXPECT_FALSE(lru.PopOldest().has_value());
}

TEST(LruOrderTest, RemoveTakesOutOfTheMiddleAndIgnoresAbsent) {
  LruOrder lru(4);
  for (int32_t id : {0, 1, 2, 3}) lru.Touch(id);
  lru.Remove(1);
  lru.Remove(1);
  EXPECT_FALSE(lru.Contains(1));
  EXPECT_TRUE(lru.Contains(2));
  EXPECT_THAT(lru.OldestFirst(), ElementsAre(0, 2, 3));
  lru.Remove(0);
  lru.Remove(3);
  EXPECT_THAT(lru.OldestFirst(), ElementsAre(2));
  lru.Touch(1);
  EXPECT_THAT(lru.OldestFirst(), ElementsAre(2, 1));
}

TEST(LruOrderTest, RandomOperationsMatchListModel) {
  constexpr int32_t kIds = 23;
  LruOrder lru(kIds);
  std::list<int32_t> model;  // front = oldest
  std::mt19937_64 rng(7);
  for (int step = 0; step < 20000; ++step) {
    const int32_t id = static_cast<int32_t>(rng() % kIds);
    switch (rng() % 3) {
      case 0:
        lru.Touch(id);
        model.remove(id);
        model.push_back(id);
        break;
      case 1:
        lru.Remove(id);
        model.remove(id);
        break;
      default: {
        std::optional<int32_t> oldest = lru.PopOldest();
        ASSERT_EQ(oldest.has_value(), !model.empty());
        if (oldest) {
          ASSERT_EQ(*oldest, model.front());
          model.pop_front();
        }
      }
    }
    ASSERT_EQ(lru.size(), static_cast<int32_t>(model.size()));
    ASSERT_EQ(lru.Contains(id),
              std::find(model.begin(), model.end(), id) != model.end());
    if (step % 97 == 0) {
      ASSERT_EQ(lru.OldestFirst(),
                std::vector<int32_t>(model.begin(), model.end()));
    }
  }
}

}  // namespace
}  // namespace gdn
