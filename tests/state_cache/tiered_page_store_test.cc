#include "state_cache/tiered_page_store.h"

#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/state_cache/cache_test_util.h"
#include "tests/state_cache/fake_backend.h"

namespace gdn {
namespace {

using testing_cache::FakeBackend;
using testing_cache::kPageBytes;
using testing_cache::RandomPage;
using testing_cache::ReadDevicePage;
using testing_cache::WriteDevicePage;
using ::testing::ElementsAre;

std::unique_ptr<TieredPageStore> MakeStore(FakeBackend* backend,
                                           int32_t device_pages,
                                           int32_t host_pages) {
  auto store = TieredPageStore::Create(backend, kPageBytes, device_pages,
                                       host_pages, StateDType::kF32);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

// Every state counted by its one reference, nothing pinned or loose.
absl::Status CheckPlain(const TieredPageStore& store) {
  std::vector<int32_t> refs(store.max_states(), 0);
  for (StateId s = 0; s < store.max_states(); ++s) refs[s] = store.refs(s);
  return store.CheckConsistency(refs, std::vector<int32_t>(store.max_states()),
                                0);
}

TEST(ObtainableDevicePagesTest, CountsFreeThenSpillable) {
  EXPECT_EQ(ObtainableDevicePages({2, 0, 0}, 2, false), 2);
  EXPECT_EQ(ObtainableDevicePages({1, 0, 0}, 2, false), 1);
  EXPECT_EQ(ObtainableDevicePages({0, 3, 1}, 2, false), 1);  // host full after one
  EXPECT_EQ(ObtainableDevicePages({0, 3, 2}, 2, false), 2);
  EXPECT_EQ(ObtainableDevicePages({0, 0, 5}, 1, false), 0);  // all pinned
  // A restore frees its host page after the first page: room for one more spill.
  EXPECT_EQ(ObtainableDevicePages({0, 3, 1}, 2, true), 2);
  // Both tiers full: a restore swaps with an idle device state (one page,
  // and nothing left for a second).
  EXPECT_EQ(ObtainableDevicePages({0, 3, 0}, 1, true), 1);
  EXPECT_EQ(ObtainableDevicePages({0, 3, 0}, 2, true), 1);
  EXPECT_EQ(ObtainableDevicePages({0, 0, 0}, 1, true), 0);  // all pinned
  EXPECT_EQ(ObtainableDevicePages({0, 0, 0}, 0, false), 0);
}

TEST(TieredPageStoreTest, PoolIsOneAllocationOfEqualPages) {
  FakeBackend backend;
  {
    auto store = MakeStore(&backend, 4, 3);
    ASSERT_NE(store, nullptr);
    const StatePoolView pool = store->pool();
    EXPECT_NE(pool.base, nullptr);
    EXPECT_EQ(pool.page_bytes, static_cast<int64_t>(kPageBytes));
    EXPECT_EQ(pool.num_pages, 4);
    EXPECT_EQ(backend.live_device_allocations(), 1);
    EXPECT_EQ(backend.live_host_allocations(), 1);
    EXPECT_EQ(store->DeviceStats().bytes_total, 4 * kPageBytes);
    EXPECT_EQ(store->HostStats().bytes_total, 3 * kPageBytes);
  }
  EXPECT_EQ(backend.live_device_allocations(), 0);
  EXPECT_EQ(backend.live_host_allocations(), 0);
}

TEST(TieredPageStoreTest, SpillsLeastRecentlyUsedAndRestoresBytesExactly) {
  FakeBackend backend;
  auto store = MakeStore(&backend, 3, 2);
  ASSERT_NE(store, nullptr);
  std::mt19937_64 rng(11);
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<StateId> states;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<int32_t> page = store->TakeDevicePage();
    ASSERT_TRUE(page.ok());
    EXPECT_EQ(*page, i);
    bytes.push_back(RandomPage(rng));
    WriteDevicePage(store->pool(), *page, bytes.back());
    states.push_back(store->AdoptDevicePage(*page));
  }
  store->Touch(states[0]);  // order now: 1, 2, 0
  EXPECT_THAT(store->IdleDeviceStatesOldestFirst(),
              ElementsAre(states[1], states[2], states[0]));

  // Full: the next page is state 1's, after it moved to host page 0.
  absl::StatusOr<int32_t> page = store->TakeDevicePage();
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(*page, 1);
  EXPECT_EQ(store->tier(states[1]), Tier::kHost);
  EXPECT_EQ(store->page(states[1]), 0);
  EXPECT_EQ(store->spills(), 1u);
  // The page is loose now: scribble over it as a kernel would.
  WriteDevicePage(store->pool(), *page, RandomPage(rng));
  store->ReturnDevicePage(*page);

  std::vector<uint8_t> read;
  ASSERT_TRUE(store->ReadState(states[1], &read).ok());
  EXPECT_EQ(read, bytes[1]);  // read from the host copy
  EXPECT_EQ(store->tier(states[1]), Tier::kHost);

  ASSERT_TRUE(store->Restore(states[1]).ok());
  EXPECT_EQ(store->tier(states[1]), Tier::kDevice);
  EXPECT_EQ(store->page(states[1]), 1);  // the lowest free device page
  EXPECT_EQ(store->restores(), 1u);
  EXPECT_EQ(ReadDevicePage(store->pool(), store->page(states[1])), bytes[1]);
  EXPECT_EQ(store->HostStats().pages_used, 0);
  EXPECT_TRUE(CheckPlain(*store).ok()) << CheckPlain(*store);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store->ReadState(states[i], &read).ok());
    EXPECT_EQ(read, bytes[i]) << "state " << i;
  }
}

TEST(TieredPageStoreTest, PinnedStatesAreNeverSpilled) {
  FakeBackend backend;
  auto store = MakeStore(&backend, 2, 2);
  ASSERT_NE(store, nullptr);
  const StateId a = store->AdoptDevicePage(*store->TakeDevicePage());
  const StateId b = store->AdoptDevicePage(*store->TakeDevicePage());
  store->Pin(a);  // a is the oldest, but in use
  EXPECT_EQ(store->DeviceStats().pages_pinned, 1);
  absl::StatusOr<int32_t> page = store->TakeDevicePage();
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(store->tier(a), Tier::kDevice);
  EXPECT_EQ(store->tier(b), Tier::kHost);
  // Everything on the device is pinned or loose now.
  EXPECT_EQ(store->TakeDevicePage().status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store->DeviceStats().pages_pinned, 2);
  store->ReturnDevicePage(*page);
  store->Unpin(a);
  EXPECT_TRUE(CheckPlain(*store).ok()) << CheckPlain(*store);
}

TEST(TieredPageStoreTest, FailedSpillCopyKeepsStateOnDevice) {
  FakeBackend backend;
  auto store = MakeStore(&backend, 1, 1);
  ASSERT_NE(store, nullptr);
  std::mt19937_64 rng(3);
  const int32_t page = *store->TakeDevicePage();
  const std::vector<uint8_t> bytes = RandomPage(rng);
  WriteDevicePage(store->pool(), page, bytes);
  const StateId state = store->AdoptDevicePage(page);
  backend.fail_next_copy_to_host = true;
  EXPECT_EQ(store->TakeDevicePage().status().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(store->tier(state), Tier::kDevice);
  EXPECT_EQ(store->HostStats().pages_used, 0);
  EXPECT_EQ(store->spills(), 0u);
  EXPECT_EQ(ReadDevicePage(store->pool(), page), bytes);
  EXPECT_TRUE(CheckPlain(*store).ok()) << CheckPlain(*store);
}

// Two device pages, two host pages, four states: 0 and 1 spilled to host
// pages 0 and 1, 2 and 3 on device pages 0 and 1 (2 the least recently used).
class FullStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = MakeStore(&backend_, 2, 2);
    ASSERT_NE(store_, nullptr);
    for (int i = 0; i < 4; ++i) {
      const int32_t page = *store_->TakeDevicePage();
      bytes_.push_back(RandomPage(rng_));
      WriteDevicePage(store_->pool(), page, bytes_.back());
      states_.push_back(store_->AdoptDevicePage(page));
    }
    ASSERT_EQ(store_->page(states_[0]), 0);
    ASSERT_EQ(store_->tier(states_[0]), Tier::kHost);
    ASSERT_EQ(store_->page(states_[1]), 1);
    ASSERT_EQ(store_->tier(states_[1]), Tier::kHost);
    ASSERT_THAT(store_->IdleDeviceStatesOldestFirst(),
                ElementsAre(states_[2], states_[3]));
  }
  void ExpectAt(int i, Tier tier, int32_t page) {
    EXPECT_EQ(store_->tier(states_[i]), tier) << "state " << i;
    EXPECT_EQ(store_->page(states_[i]), page) << "state " << i;
  }
  void ExpectBytesIntact() {
    std::vector<uint8_t> read;
    for (size_t i = 0; i < states_.size(); ++i) {
      ASSERT_TRUE(store_->ReadState(states_[i], &read).ok());
      EXPECT_EQ(read, bytes_[i]) << "state " << i;
    }
  }

  FakeBackend backend_;
  std::mt19937_64 rng_{5};
  std::unique_ptr<TieredPageStore> store_;
  std::vector<std::vector<uint8_t>> bytes_;
  std::vector<StateId> states_;
};

TEST_F(FullStoreTest, RestoreSwapsWithTheLeastRecentlyUsedIdleState) {
  store_->Pin(states_[2]);  // the LRU, but in use: it must not move
  ASSERT_TRUE(store_->Restore(states_[0]).ok());
  // 3 went to the spare host page (2), 0 came up into 3's device page; 0's
  // host page is the spare now.
  ExpectAt(0, Tier::kDevice, 1);
  ExpectAt(2, Tier::kDevice, 0);
  ExpectAt(3, Tier::kHost, 2);
  EXPECT_EQ(store_->spills(), 3u);
  EXPECT_EQ(store_->restores(), 1u);
  EXPECT_EQ(store_->HostStats().pages_used, 2);
  EXPECT_EQ(store_->HostStats().pages_total, 2);
  EXPECT_EQ(store_->DeviceStats().pages_used, 2);
  std::vector<int32_t> refs(store_->max_states(), 0);
  std::vector<int32_t> pins(store_->max_states(), 0);
  for (StateId s : states_) refs[s] = 1;
  pins[states_[2]] = 1;
  EXPECT_TRUE(store_->CheckConsistency(refs, pins, 0).ok())
      << store_->CheckConsistency(refs, pins, 0);

  // Again: 0 (the only idle device state) swaps with 1 through host page 0.
  ASSERT_TRUE(store_->Restore(states_[1]).ok());
  ExpectAt(1, Tier::kDevice, 1);
  ExpectAt(0, Tier::kHost, 0);
  ExpectAt(3, Tier::kHost, 2);
  EXPECT_EQ(store_->restores(), 2u);
  store_->Unpin(states_[2]);
  EXPECT_TRUE(CheckPlain(*store_).ok()) << CheckPlain(*store_);
  ExpectBytesIntact();
}

TEST_F(FullStoreTest, SwapWithEveryDeviceStatePinnedIsExhausted) {
  store_->Pin(states_[2]);
  store_->Pin(states_[3]);
  const int copies = backend_.total_copies();
  EXPECT_EQ(store_->Restore(states_[0]).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(backend_.total_copies(), copies);
  ExpectAt(0, Tier::kHost, 0);
  store_->Unpin(states_[2]);
  store_->Unpin(states_[3]);
  EXPECT_TRUE(CheckPlain(*store_).ok()) << CheckPlain(*store_);
  ExpectBytesIntact();
}

TEST_F(FullStoreTest, FailedSwapCopyLosesNothing) {
  for (bool to_host : {true, false}) {
    (to_host ? backend_.fail_next_copy_to_host
             : backend_.fail_next_copy_to_device) = true;
    EXPECT_EQ(store_->Restore(states_[0]).code(), absl::StatusCode::kInternal);
    ExpectAt(0, Tier::kHost, 0);
    ExpectAt(2, Tier::kDevice, 0);
    EXPECT_EQ(store_->restores(), 0u);
    EXPECT_TRUE(CheckPlain(*store_).ok()) << CheckPlain(*store_);
    ExpectBytesIntact();
  }
  ASSERT_TRUE(store_->Restore(states_[0]).ok());  // works once copies do
  ExpectAt(0, Tier::kDevice, 0);
  ExpectAt(2, Tier::kHost, 2);
  ExpectBytesIntact();
}

TEST(TieredPageStoreTest, ReleaseFreesOnlyAtLastReference) {
  FakeBackend backend;
  auto store = MakeStore(&backend, 2, 0);
  ASSERT_NE(store, nullptr);
  const StateId state = store->AdoptDevicePage(*store->TakeDevicePage());
  store->AddRef(state);
  store->Release(state);
  EXPECT_TRUE(store->IsLive(state));
  EXPECT_EQ(store->DeviceStats().pages_used, 1);
  store->Release(state);
  EXPECT_FALSE(store->IsLive(state));
  EXPECT_EQ(store->DeviceStats().pages_used, 0);
  EXPECT_TRUE(CheckPlain(*store).ok()) << CheckPlain(*store);
}

TEST(TieredPageStoreTest, ConsistencyCheckCatchesWrongCounts) {
  FakeBackend backend;
  auto store = MakeStore(&backend, 2, 1);
  ASSERT_NE(store, nullptr);
  const StateId state = store->AdoptDevicePage(*store->TakeDevicePage());
  std::vector<int32_t> refs(store->max_states(), 0);
  std::vector<int32_t> pins(store->max_states(), 0);
  EXPECT_FALSE(store->CheckConsistency(refs, pins, 0).ok());
  refs[state] = 1;
  EXPECT_TRUE(store->CheckConsistency(refs, pins, 0).ok());
  EXPECT_FALSE(store->CheckConsistency(refs, pins, 1).ok());
  pins[state] = 1;
  EXPECT_FALSE(store->CheckConsistency(refs, pins, 0).ok());
}

}  // namespace
}  // namespace gdn
