// Thousands of random operations (fixed seeds) against a simple reference
// model of sessions -> per layer (position, bytes), checking after every
// step that the cache agrees with the model and that its books balance:
// no page leaked, pages used = distinct states held, sharing as forked.
#include <algorithm>
#include <ostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "state_cache/paged_state_cache.h"
#include "tests/state_cache/cache_test_util.h"
#include "tests/state_cache/fake_backend.h"

namespace gdn {
namespace {

using namespace testing_cache;  // NOLINT: test helpers

// The reference: what every (session, layer) must hold. A "version" names
// one written state; forks share versions, so the number of distinct live
// versions is the number of pages the cache must use.
struct ModelLayer {
  int64_t position = 0;
  int64_t version = 0;  // 0: the zero state
};
struct ModelSession {
  std::vector<ModelLayer> layers;
  absl::Time last_access;
};

struct RandomCase;
void PrintTo(const RandomCase& c, std::ostream* os);

struct RandomCase {
  const char* name;
  int num_layers;
  int device_pages;
  int host_pages;
  bool evict;
  uint64_t seed;
};

void PrintTo(const RandomCase& c, std::ostream* os) { *os << c.name; }

class RandomOpsTest : public ::testing::TestWithParam<RandomCase>, public FakeCache {
 protected:
  void SetUp() override {
    const RandomCase& c = GetParam();
    rng_.seed(c.seed);
    Make(SmallConfig(c.num_layers, c.device_pages, c.host_pages, c.evict));
  }

  int num_layers() const { return GetParam().num_layers; }
  size_t Pick(size_t n) { return static_cast<size_t>(rng_() % n); }
  bool Chance(double p) {
    return std::uniform_real_distribution<double>(0, 1)(rng_) < p;
  }
  std::string PickSession() {
    auto it = model_.begin();
    std::advance(it, Pick(model_.size()));
    return it->first;
  }
  int32_t PickLayer() { return static_cast<int32_t>(Pick(num_layers())); }

  std::map<int64_t, int> VersionHolders() const {
    std::map<int64_t, int> holders;
    for (const auto& [id, session] : model_) {
      for (const ModelLayer& layer : session.layers) {
        if (layer.version != 0) ++holders[layer.version];
      }
    }
    return holders;
  }

  void Touch(const std::string& id) { model_[id].last_access = clock_.Now(); }

  // Sessions the cache dropped during `requester`'s request must have been
  // evicted: allowed only with eviction on, never the requester or a
  // session with a write in flight.
  void AccountForEvictions(const std::string& requester,
                           const std::set<std::string>& leased,
                           uint64_t evictions_before) {
    std::vector<std::string> gone;
    for (const auto& [id, session] : model_) {
      if (!cache_->HasSession(id)) gone.push_back(id);
    }
    ASSERT_EQ(cache_->Stats().evictions - evictions_before, gone.size());
    if (gone.empty()) return;
    ASSERT_TRUE(GetParam().evict) << gone.front() << " vanished";
    for (const std::string& id : gone) {
      ASSERT_NE(id, requester);
      ASSERT_EQ(leased.count(id), 0u) << "evicted " << id << " mid-write";
      model_.erase(id);
    }
  }

  // One write lease, checked against the model; nullopt when refused.
  std::optional<WriteLease> Acquire(const std::string& id, int32_t layer,
                                    const std::set<std::string>& leased) {
    const StateCacheStats before = cache_->Stats();
    absl::StatusOr<WriteLease> lease = cache_->AcquireForWrite(id, layer);
    if (!lease.ok()) {
      EXPECT_EQ(lease.status().code(), absl::StatusCode::kResourceExhausted)
          << lease.status();
      ++exhausted_;
      // Nothing changed: the same sessions and the same books. (A spill
      // that completed would keep the data, but the plan runs first so
      // there is none.)
      StateCacheStats after = cache_->Stats();
      ExpectSameStats(after, before);
      for (const auto& [sid, session] : model_) {
        EXPECT_TRUE(cache_->HasSession(sid)) << sid;
      }
      return std::nullopt;
    }
    AccountForEvictions(id, leased, before.evictions);
    const ModelLayer& model = model_[id].layers[layer];
    EXPECT_EQ(lease->position, model.position);
    EXPECT_GE(lease->write_page, 0);
    EXPECT_LT(lease->write_page, cache_->pool().num_pages);
    if (model.version == 0) {
      EXPECT_EQ(lease->read_page, kZeroStatePage);
    } else {
      EXPECT_NE(lease->read_page, kZeroStatePage);
      // The kernel's view: the state it reads is the model's bytes.
      EXPECT_EQ(ReadDevicePage(cache_->pool(), lease->read_page),
                contents_[model.version])
          << id << " layer " << layer;
      const bool shared = VersionHolders()[model.version] > 1;
      EXPECT_EQ(lease->read_page == lease->write_page, !shared);
    }
    Touch(id);
    return *lease;
  }

  void Finish(const WriteLease& lease, bool commit) {
    ModelLayer& model = model_[lease.session].layers[lease.layer];
    const bool in_place = lease.read_page == lease.write_page;
    if (commit) {
      std::vector<uint8_t> bytes = RandomPage(rng_);
      WriteDevicePage(cache_->pool(), lease.write_page, bytes);
      const int64_t position = model.position + 1 + Pick(8);
      cache_->Commit(lease, position);
      model.position = position;
      model.version = next_version_++;
      contents_[model.version] = std::move(bytes);
      Touch(lease.session);
      ++commits_;
    } else {
      // A failed kernel may have scribbled on a fresh page, never in place
      // (Abort means the stored state is as before).
      if (!in_place) {
        WriteDevicePage(cache_->pool(), lease.write_page, RandomPage(rng_));
      }
      cache_->Abort(lease);
    }
  }

  void StepWrite() {
    const std::string id = PickSession();
    std::optional<WriteLease> lease = Acquire(id, PickLayer(), {});
    if (lease) Finish(*lease, Chance(0.85));
  }

  // Several leases in flight at once (one engine batch), checked mid-way.
  void StepBatch() {
    std::vector<WriteLease> leases;
    std::set<std::string> leased;
    std::set<std::pair<std::string, int32_t>> taken;
    const int want = 1 + static_cast<int>(Pick(4));
    for (int i = 0; i < want && !model_.empty(); ++i) {
      const std::string id = PickSession();
      const int32_t layer = PickLayer();
      if (taken.count({id, layer})) {
        EXPECT_EQ(cache_->AcquireForWrite(id, layer).status().code(),
                  absl::StatusCode::kFailedPrecondition);
        continue;
      }
      std::optional<WriteLease> lease = Acquire(id, layer, leased);
      if (!lease) continue;
      leases.push_back(*lease);
      leased.insert(id);
      taken.insert({id, layer});
    }
    absl::Status mid = CheckInvariants(*cache_);
    EXPECT_TRUE(mid.ok()) << mid;
    if (!leases.empty()) {
      EXPECT_GT(cache_->Stats().device.pages_pinned, 0);
      EXPECT_EQ(cache_->CloseSession(leases.front().session).code(),
                absl::StatusCode::kFailedPrecondition);
    }
    std::shuffle(leases.begin(), leases.end(), rng_);
    for (const WriteLease& lease : leases) Finish(lease, Chance(0.8));
  }

  void StepCreate() {
    const std::string id = absl::StrCat("s", next_session_++);
    ASSERT_TRUE(cache_->CreateSession(id).ok());
    model_[id].layers.resize(num_layers());
    Touch(id);
  }

  void StepFork() {
    const std::string parent = PickSession();
    const std::string child = absl::StrCat("s", next_session_++);
    const int copies = backend_.total_copies();
    ASSERT_TRUE(cache_->ForkSession(parent, child).ok());
    EXPECT_EQ(backend_.total_copies(), copies);
    model_[child] = model_[parent];
    Touch(parent);
    Touch(child);
  }

  void StepClose() {
    const std::string id = PickSession();
    ASSERT_TRUE(cache_->CloseSession(id).ok());
    model_.erase(id);
  }

  void StepExport() {
    const std::string id = PickSession();
    const int32_t layer = PickLayer();
    const uint64_t restores = cache_->Stats().restores;
    absl::StatusOr<StateCache::LayerState> state = cache_->ExportLayer(id, layer);
    ASSERT_TRUE(state.ok()) << state.status();
    const ModelLayer& model = model_[id].layers[layer];
    EXPECT_EQ(state->position, model.position);
    if (model.version == 0) {
      EXPECT_TRUE(state->bytes.empty());
    } else {
      EXPECT_EQ(state->bytes, contents_[model.version]) << id << " " << layer;
    }
    EXPECT_EQ(cache_->Stats().restores, restores);  // read where it lies
    Touch(id);
  }

  void StepImport() {
    const std::string id = PickSession();
    const int32_t layer = PickLayer();
    if (Chance(0.1)) {
      EXPECT_EQ(cache_->ImportLayer(id, layer, {1, RandomPage(rng_, 256)}).code(),
                absl::StatusCode::kInvalidArgument);
      return;
    }
    const bool zero = Chance(0.15);
    StateCache::LayerState state;
    state.position = static_cast<int64_t>(Pick(1000));
    if (!zero) state.bytes = RandomPage(rng_);
    const StateCacheStats before = cache_->Stats();
    absl::Status status = cache_->ImportLayer(id, layer, state);
    if (!status.ok()) {
      EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
      ++exhausted_;
      ExpectSameStats(cache_->Stats(), before);
      return;
    }
    AccountForEvictions(id, {}, before.evictions);
    ModelLayer& model = model_[id].layers[layer];
    model.position = state.position;
    model.version = zero ? 0 : next_version_++;
    if (!zero) contents_[model.version] = state.bytes;
    Touch(id);
  }

  void StepExpire() {
    const absl::Time cutoff = clock_.Now() - absl::Seconds(Pick(60));
    std::set<std::string> expected;
    for (const auto& [id, session] : model_) {
      if (session.last_access < cutoff) expected.insert(id);
    }
    const std::vector<std::string> closed = cache_->ExpireIdle(cutoff);
    EXPECT_EQ(std::set<std::string>(closed.begin(), closed.end()), expected);
    for (const std::string& id : expected) model_.erase(id);
  }

  // Everything the model knows, without touching recency.
  void CheckAgainstModel() {
    absl::Status status = CheckInvariants(*cache_);
    ASSERT_TRUE(status.ok()) << status;
    const StateCacheStats stats = cache_->Stats();
    const std::map<int64_t, int> holders = VersionHolders();
    ASSERT_EQ(stats.device.pages_used + stats.host.pages_used,
              static_cast<int64_t>(holders.size()))
        << "pages used != distinct states held";
    ASSERT_LE(stats.device.pages_used, stats.device.pages_total);
    ASSERT_LE(stats.host.pages_used, stats.host.pages_total);
    ASSERT_EQ(stats.device.pages_pinned, 0);
    ASSERT_EQ(stats.sessions, static_cast<int64_t>(model_.size()));
    std::vector<std::string> ids;
    for (const auto& [id, session] : model_) ids.push_back(id);
    ASSERT_EQ(cache_->ListSessions(), ids);
    for (const auto& [id, session] : model_) {
      absl::StatusOr<SessionInfo> info = cache_->DescribeSession(id);
      ASSERT_TRUE(info.ok());
      EXPECT_EQ(info->last_access, session.last_access) << id;
      for (int32_t layer = 0; layer < num_layers(); ++layer) {
        const ModelLayer& model = session.layers[layer];
        const LayerStateInfo& got = info->layers[layer];
        ASSERT_EQ(got.position, model.position) << id << " " << layer;
        ASSERT_EQ(got.has_state, model.version != 0) << id << " " << layer;
        if (got.has_state) {
          ASSERT_EQ(got.shared_with, holders.at(model.version) - 1);
        }
      }
    }
  }

  // Every byte of every state (touches every session's recency).
  void CheckAllBytes() {
    for (auto& [id, session] : model_) {
      for (int32_t layer = 0; layer < num_layers(); ++layer) {
        const ModelLayer& model = session.layers[layer];
        const std::vector<uint8_t> bytes = ExportBytes(*cache_, id, layer);
        if (model.version == 0) {
          ASSERT_TRUE(bytes.empty());
        } else {
          ASSERT_EQ(bytes, contents_[model.version]) << id << " " << layer;
        }
      }
      session.last_access = clock_.Now();
    }
  }

  std::mt19937_64 rng_;
  std::map<std::string, ModelSession> model_;
  std::map<int64_t, std::vector<uint8_t>> contents_;  // version -> bytes
  int64_t next_version_ = 1;
  int next_session_ = 0;
  int exhausted_ = 0;
  int commits_ = 0;
};

TEST_P(RandomOpsTest, CacheMatchesModel) {
  constexpr int kSteps = 6000;
  for (int step = 0; step < kSteps; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    clock_.Advance(absl::Milliseconds(200 + Pick(1600)));
    const size_t roll = Pick(100);
    if (model_.size() < 2 || (roll < 10 && model_.size() < 12)) {
      StepCreate();
    } else if (roll < 45) {
      StepWrite();
    } else if (roll < 57) {
      StepBatch();
    } else if (roll < 64) {
      if (model_.size() < 12) StepFork();
    } else if (roll < 71) {
      StepClose();
    } else if (roll < 81) {
      StepExport();
    } else if (roll < 91) {
      StepImport();
    } else if (roll < 94) {
      StepExpire();
    }
    CheckAgainstModel();
    if (HasFatalFailure()) return;
    if (step % 50 == 49) CheckAllBytes();
    if (HasFatalFailure() || HasFailure()) return;
  }
  CheckAllBytes();
  // The run went through the interesting paths.
  const StateCacheStats stats = cache_->Stats();
  EXPECT_GT(commits_, 1000);
  EXPECT_GT(stats.cow_copies, 50u);
  EXPECT_GT(stats.expired, 0u);
  if (GetParam().host_pages > 0) {
    EXPECT_GT(stats.spills, 50u);
    EXPECT_GT(stats.restores, 50u);
  }
  if (GetParam().evict) {
    EXPECT_GT(stats.evictions, 10u);
  } else {
    EXPECT_EQ(stats.evictions, 0u);
    EXPECT_GT(exhausted_, 10);
  }
  // Closing everything gives every page back.
  for (const auto& [id, session] : model_) {
    ASSERT_TRUE(cache_->CloseSession(id).ok());
  }
  EXPECT_EQ(cache_->Stats().device.pages_used, 0);
  EXPECT_EQ(cache_->Stats().host.pages_used, 0);
  absl::Status status = CheckInvariants(*cache_);
  EXPECT_TRUE(status.ok()) << status;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, RandomOpsTest,
    ::testing::Values(RandomCase{"TightNoEviction", 3, 8, 10, false, 1},
                      RandomCase{"TightEviction", 3, 6, 5, true, 2},
                      RandomCase{"NoHostTierEviction", 2, 5, 0, true, 3},
                      RandomCase{"Roomy", 4, 12, 24, false, 4}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace gdn
