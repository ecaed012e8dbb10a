#include "state_cache/session_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn {
namespace {

using ::testing::ElementsAre;

TEST(SessionTableTest, InsertFindErase) {
  SessionTable table;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  SessionRecord* a = table.Insert("a", 3, t0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->id, "a");
  ASSERT_EQ(a->layers.size(), 3u);
  for (const LayerEntry& entry : a->layers) {
    EXPECT_EQ(entry.state, kNoState);
    EXPECT_EQ(entry.position, 0);
    EXPECT_FALSE(entry.leased);
  }
  EXPECT_EQ(a->last_access, t0);
  EXPECT_EQ(table.Find("a"), a);
  EXPECT_EQ(table.Find("b"), nullptr);
  table.Insert("b", 3, t0);
  EXPECT_EQ(table.size(), 2);
  table.Erase("a");
  EXPECT_EQ(table.Find("a"), nullptr);
  EXPECT_THAT(table.Ids(), ElementsAre("b"));
  EXPECT_THAT(table.OldestFirst(), ElementsAre("b"));
}

TEST(SessionTableTest, TouchMovesToMostRecentAndStampsTime) {
  SessionTable table;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  table.Insert("c", 1, t0);
  table.Insert("a", 1, t0);
  table.Insert("b", 1, t0);
  EXPECT_THAT(table.OldestFirst(), ElementsAre("c", "a", "b"));
  EXPECT_THAT(table.Ids(), ElementsAre("a", "b", "c"));
  table.Touch(table.Find("c"), t0 + absl::Seconds(5));
  EXPECT_THAT(table.OldestFirst(), ElementsAre("a", "b", "c"));
  EXPECT_EQ(table.Find("c")->last_access, t0 + absl::Seconds(5));
  // Equal clock readings are still ordered by the touches.
  table.Touch(table.Find("a"), t0);
  EXPECT_THAT(table.OldestFirst(), ElementsAre("b", "c", "a"));
  table.Erase("c");
  EXPECT_THAT(table.OldestFirst(), ElementsAre("b", "a"));
}

}  // namespace
}  // namespace gdn
