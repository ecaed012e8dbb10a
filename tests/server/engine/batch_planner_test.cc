#include "server/engine/batch_planner.h"

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/test_random.h"

namespace gdn {
namespace {

// Slots stand for (session, layer) states: one id per distinct pair.
int32_t SlotOf(const std::string& session, int32_t layer) {
  static std::map<std::pair<std::string, int32_t>, int32_t> slots;
  return slots.emplace(std::make_pair(session, layer), static_cast<int32_t>(slots.size()))
      .first->second;
}

PlanItem Item(const std::string& session, int32_t layer, int32_t total,
              int32_t done = 0) {
  return PlanItem{SlotOf(session, layer), total, done};
}

int64_t Sum(const std::vector<PlannedChunk>& chunks) {
  int64_t sum = 0;
  for (const PlannedChunk& c : chunks) sum += c.tokens;
  return sum;
}

TEST(BatchPlannerTest, DecodesGoFirstAndWhole) {
  const std::vector<PlanItem> items = {
      Item("a", 0, 100), Item("b", 0, 1), Item("c", 1, kMaxDecodeTokens),
      Item("d", 3, kMaxDecodeTokens + 1)};
  const BatchPlan plan = PlanBatch(items, {/*max_batch_tokens=*/4096, 64});
  ASSERT_EQ(plan.decode.size(), 2u);
  EXPECT_EQ(plan.decode[0].item, 1u);
  EXPECT_EQ(plan.decode[0].tokens, 1);
  EXPECT_EQ(plan.decode[1].item, 2u);
  EXPECT_EQ(plan.decode[1].tokens, kMaxDecodeTokens);
  EXPECT_EQ(plan.decode_tokens, 1 + kMaxDecodeTokens);
  // Items over kMaxDecodeTokens are prefill, in admission order.
  ASSERT_EQ(plan.prefill.size(), 2u);
  EXPECT_EQ(plan.prefill[0].item, 0u);
  EXPECT_EQ(plan.prefill[1].item, 3u);
  EXPECT_EQ(plan.prefill_tokens, 100 + kMaxDecodeTokens + 1);
}

TEST(BatchPlannerTest, LongPrefillIsChunkedUnderTheBudgetAndAligned) {
  const std::vector<PlanItem> items = {Item("long", 0, 1000)};
  const BatchPlan plan = PlanBatch(items, {/*max_batch_tokens=*/300, 64});
  ASSERT_EQ(plan.prefill.size(), 1u);
  EXPECT_EQ(plan.prefill[0].offset, 0);
  EXPECT_EQ(plan.prefill[0].tokens, 256);  // 300 rounded down to 64s

  // The engine carries it: the next iteration continues where it stopped.
  const BatchPlan next =
      PlanBatch({Item("long", 0, 1000, 256)}, {300, 64});
  ASSERT_EQ(next.prefill.size(), 1u);
  EXPECT_EQ(next.prefill[0].offset, 256);
  EXPECT_EQ(next.prefill[0].tokens, 256);

  // The tail fits whole, unaligned.
  const BatchPlan last = PlanBatch({Item("long", 0, 1000, 768)}, {300, 64});
  ASSERT_EQ(last.prefill.size(), 1u);
  EXPECT_EQ(last.prefill[0].offset, 768);
  EXPECT_EQ(last.prefill[0].tokens, 232);
}

TEST(BatchPlannerTest, LongPrefillDoesNotStallDecodes) {
  // A prefill far over the budget still leaves every decode in the plan.
  std::vector<PlanItem> items = {Item("huge", 0, 100000)};
  for (int i = 0; i < 20; ++i) items.push_back(Item("s" + std::to_string(i), 2, 1));
  const BatchPlan plan = PlanBatch(items, {512, 64});
  EXPECT_EQ(plan.decode.size(), 20u);
  EXPECT_EQ(plan.prefill_tokens, 512);
}

TEST(BatchPlannerTest, NeverTwoChunksOfOneSessionLayer) {
  const std::vector<PlanItem> items = {
      Item("a", 0, 2), Item("a", 0, 3),   // same key, decode
      Item("a", 1, 4),                    // other layer: fine
      Item("b", 0, 50), Item("b", 0, 50), // same key, prefill
      Item("a", 0, 70)};                  // same key as a decode above
  const BatchPlan plan = PlanBatch(items, {8192, 64});
  std::set<int32_t> keys;
  for (const auto* chunks : {&plan.decode, &plan.prefill}) {
    for (const PlannedChunk& c : *chunks) {
      EXPECT_TRUE(keys.insert(items[c.item].slot).second) << "slot " << items[c.item].slot;
    }
  }
  EXPECT_EQ(plan.decode.size(), 2u);   // a/0 (first), a/1
  EXPECT_EQ(plan.prefill.size(), 1u);  // b/0 (first)
  EXPECT_EQ(plan.decode[0].item, 0u);
  EXPECT_EQ(plan.prefill[0].item, 3u);
}

TEST(BatchPlannerTest, RandomQueuesRespectEveryRule) {
  const uint64_t seed = gdn::testing::FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    const int64_t budget = std::uniform_int_distribution<int>(8, 2000)(rng);
    std::vector<PlanItem> items;
    const int n = std::uniform_int_distribution<int>(1, 40)(rng);
    for (int i = 0; i < n; ++i) {
      const int total = std::uniform_int_distribution<int>(0, 3)(rng) == 0
                            ? std::uniform_int_distribution<int>(9, 3000)(rng)
                            : std::uniform_int_distribution<int>(1, 8)(rng);
      const int done = total > kMaxDecodeTokens
                           ? std::uniform_int_distribution<int>(0, total - 1)(rng)
                           : 0;
      items.push_back(Item("s" + std::to_string(rng() % 8),
                           static_cast<int32_t>(rng() % 3), total, done));
    }
    const BatchPlan plan = PlanBatch(items, {budget, 64});
    std::set<int32_t> keys;
    for (const PlannedChunk& c : plan.decode) {
      EXPECT_TRUE(items[c.item].is_decode());
      EXPECT_EQ(c.tokens, items[c.item].remaining());
      EXPECT_TRUE(keys.insert(items[c.item].slot).second);
    }
    for (const PlannedChunk& c : plan.prefill) {
      EXPECT_FALSE(items[c.item].is_decode());
      EXPECT_EQ(c.offset, items[c.item].done_tokens);
      EXPECT_GE(c.tokens, 1);
      EXPECT_LE(c.tokens, items[c.item].remaining());
      if (c.tokens < items[c.item].remaining()) {
        EXPECT_EQ(c.tokens % std::min<int64_t>(64, budget), 0);
      }
      EXPECT_TRUE(keys.insert(items[c.item].slot).second);
    }
    EXPECT_LE(Sum(plan.decode), budget);
    EXPECT_LE(Sum(plan.prefill), budget);
    EXPECT_EQ(Sum(plan.decode), plan.decode_tokens);
    EXPECT_EQ(Sum(plan.prefill), plan.prefill_tokens);
    // Progress: when some prefill item's key is not taken by a decode, the
    // plan has a prefill chunk.
    std::set<int32_t> decode_keys;
    for (const PlannedChunk& c : plan.decode) decode_keys.insert(items[c.item].slot);
    bool free_prefill = false;
    for (const PlanItem& it : items) {
      free_prefill |= !it.is_decode() && !decode_keys.count(it.slot);
    }
    if (free_prefill) {
      EXPECT_FALSE(plan.prefill.empty());
    }
  }
}

}  // namespace
}  // namespace gdn
