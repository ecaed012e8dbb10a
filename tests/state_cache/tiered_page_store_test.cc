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
  EXPECT_EQ(ObtainableDevicePages({0, 3, 0}, 2, true), 0);
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
