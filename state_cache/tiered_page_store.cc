#include "state_cache/tiered_page_store.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "state_cache/invariant.h"

namespace gdn {

int ObtainableDevicePages(TierRoom room, int wanted, bool first_frees_host) {
  int got = 0;
  while (got < wanted) {
    // A restore with both tiers full swaps with an idle device state: the
    // host page it leaves takes the spilled one, so it needs no free host
    // page (net: one idle device state fewer, host room unchanged).
    const bool swap = got == 0 && first_frees_host;
    if (room.free_device > 0) {
      --room.free_device;
    } else if (room.idle_device > 0 && (room.free_host > 0 || swap)) {
      --room.idle_device;  // spilled: its device page is taken
      --room.free_host;
    } else {
      break;
    }
    if (swap) ++room.free_host;
    ++got;
  }
  return got;
}

absl::StatusOr<std::unique_ptr<TieredPageStore>> TieredPageStore::Create(
    Backend* backend, int64_t page_bytes, int32_t device_pages,
    int32_t host_pages, StateDType dtype) {
  if (backend == nullptr) return absl::InvalidArgumentError("backend is null");
  if (page_bytes <= 0 || device_pages <= 0 || host_pages < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad tier sizes: page_bytes ", page_bytes,
                     ", device pages ", device_pages, ", host pages ",
                     host_pages));
  }
  std::unique_ptr<TieredPageStore> store(new TieredPageStore(
      backend, page_bytes, device_pages, host_pages, dtype));
  absl::StatusOr<void*> device =
      backend->Allocate(static_cast<size_t>(device_pages) * page_bytes);
  if (!device.ok()) return device.status();
  store->device_base_ = *device;
  if (host_pages > 0) {
    // One page more than the tier holds: the spare a swap copies through.
    absl::StatusOr<void*> host = backend->AllocateHost(
        static_cast<size_t>(host_pages + 1) * page_bytes);
    if (!host.ok()) return host.status();  // the destructor frees the pool
    store->host_base_ = *host;
  }
  return store;
}

TieredPageStore::TieredPageStore(Backend* backend, int64_t page_bytes,
                                 int32_t device_pages, int32_t host_pages,
                                 StateDType dtype)
    : backend_(backend),
      page_bytes_(page_bytes),
      dtype_(dtype),
      device_pages_(device_pages),
      host_pages_(host_pages > 0 ? host_pages + 1 : 0),
      state_ids_(device_pages + host_pages),
      records_(device_pages + host_pages),
      device_owner_(device_pages, kNoState),
      host_owner_(host_pages_.num_pages(), kNoState),
      idle_device_(device_pages) {
  if (host_pages == 0) return;
  // The spare starts as the highest page, held so that Allocate() never
  // hands it out: states fill host pages 0, 1, ... as without it.
  for (int32_t page = 0; page <= host_pages; ++page) {
    const std::optional<int32_t> taken = host_pages_.Allocate();
    GDN_CACHE_INVARIANT(taken == page);
  }
  for (int32_t page = 0; page < host_pages; ++page) host_pages_.Release(page);
  spare_host_page_ = host_pages;
}

TieredPageStore::~TieredPageStore() {
  // Copies in flight may still read or write either tier.
  if (device_base_ != nullptr || host_base_ != nullptr) {
    (void)backend_->Synchronize();
  }
  if (device_base_ != nullptr) backend_->Free(device_base_);
  if (host_base_ != nullptr) backend_->FreeHost(host_base_);
}

StatePoolView TieredPageStore::pool() const {
  StatePoolView view;
  view.base = device_base_;
  view.page_bytes = page_bytes_;
  view.num_pages = device_pages_.num_pages();
  view.dtype = dtype_;
  return view;
}

uint8_t* TieredPageStore::DevicePage(int32_t page) const {
  return static_cast<uint8_t*>(device_base_) + page * page_bytes_;
}

uint8_t* TieredPageStore::HostPage(int32_t page) const {
  return static_cast<uint8_t*>(host_base_) + page * page_bytes_;
}

absl::Status TieredPageStore::SpillOldest() {
  const std::optional<int32_t> device_page = idle_device_.Oldest();
  if (!device_page) {
    return absl::ResourceExhaustedError("no idle device state to spill");
  }
  const std::optional<int32_t> host_page = host_pages_.Allocate();
  if (!host_page) return absl::ResourceExhaustedError("host tier is full");
  absl::Status copied = backend_->CopyToHost(
      HostPage(*host_page), DevicePage(*device_page), page_bytes_);
  if (!copied.ok()) {
    host_pages_.Release(*host_page);  // the state stays on the device
    return copied;
  }
  const StateId state = device_owner_[*device_page];
  GDN_CACHE_INVARIANT(state != kNoState && records_[state].pins == 0);
  idle_device_.Remove(*device_page);
  device_owner_[*device_page] = kNoState;
  device_pages_.Release(*device_page);
  records_[state].tier = Tier::kHost;
  records_[state].page = *host_page;
  host_owner_[*host_page] = state;
  ++spills_;
  return absl::OkStatus();
}

absl::StatusOr<int32_t> TieredPageStore::TakeDevicePage() {
  if (device_pages_.num_free() == 0) {
    absl::Status spilled = SpillOldest();
    if (!spilled.ok()) return spilled;
  }
  const std::optional<int32_t> page = device_pages_.Allocate();
  GDN_CACHE_INVARIANT(page.has_value());
  ++loose_device_pages_;
  return *page;
}

void TieredPageStore::ReturnDevicePage(int32_t page) {
  GDN_CACHE_INVARIANT(device_pages_.IsAllocated(page) &&
                      device_owner_[page] == kNoState &&
                      loose_device_pages_ > 0);
  device_pages_.Release(page);
  --loose_device_pages_;
}

StateId TieredPageStore::AdoptDevicePage(int32_t page) {
  GDN_CACHE_INVARIANT(device_pages_.IsAllocated(page) &&
                      device_owner_[page] == kNoState &&
                      loose_device_pages_ > 0);
  const std::optional<StateId> state = state_ids_.Allocate();
  GDN_CACHE_INVARIANT(state.has_value());
  --loose_device_pages_;
  records_[*state] = StateRecord{Tier::kDevice, page, 0};
  device_owner_[page] = *state;
  idle_device_.Touch(page);
  return *state;
}

void TieredPageStore::AddRef(StateId state) { state_ids_.AddRef(state); }

void TieredPageStore::FreePageOf(StateId state) {
  StateRecord& record = records_[state];
  GDN_CACHE_INVARIANT(record.pins == 0);
  if (record.tier == Tier::kDevice) {
    idle_device_.Remove(record.page);
    device_owner_[record.page] = kNoState;
    device_pages_.Release(record.page);
  } else {
    host_owner_[record.page] = kNoState;
    host_pages_.Release(record.page);
  }
  record = StateRecord{};
}

void TieredPageStore::Release(StateId state) {
  GDN_CACHE_INVARIANT(IsLive(state));
  if (state_ids_.RefCount(state) == 1) FreePageOf(state);
  state_ids_.Release(state);
}

void TieredPageStore::Pin(StateId state) {
  StateRecord& record = records_[state];
  GDN_CACHE_INVARIANT(IsLive(state) && record.tier == Tier::kDevice);
  if (record.pins++ == 0) {
    idle_device_.Remove(record.page);
    ++pinned_states_;
  }
}

void TieredPageStore::Unpin(StateId state) {
  StateRecord& record = records_[state];
  GDN_CACHE_INVARIANT(IsLive(state) && record.pins > 0);
  if (--record.pins == 0) {
    idle_device_.Touch(record.page);
    --pinned_states_;
  }
}

void TieredPageStore::Touch(StateId state) {
  const StateRecord& record = records_[state];
  if (record.tier == Tier::kDevice && record.pins == 0) {
    idle_device_.Touch(record.page);
  }
}

absl::Status TieredPageStore::SwapWithOldest(StateId state) {
  const std::optional<int32_t> device_page = idle_device_.Oldest();
  if (!device_page) {
    return absl::ResourceExhaustedError(
        "both tiers full and no idle device state to swap with");
  }
  StateRecord& record = records_[state];
  const int32_t host_page = record.page;
  // Stream order: the idle state goes out into the spare before the host
  // state comes in over it.
  absl::Status copied = backend_->CopyToHost(
      HostPage(spare_host_page_), DevicePage(*device_page), page_bytes_);
  if (!copied.ok()) return copied;
  copied = backend_->CopyToDevice(DevicePage(*device_page),
                                  HostPage(host_page), page_bytes_);
  if (!copied.ok()) return copied;  // the spare's bytes are nobody's
  const StateId victim = device_owner_[*device_page];
  GDN_CACHE_INVARIANT(victim != kNoState && records_[victim].pins == 0);
  idle_device_.Remove(*device_page);
  records_[victim].tier = Tier::kHost;
  records_[victim].page = spare_host_page_;
  host_owner_[spare_host_page_] = victim;
  host_owner_[host_page] = kNoState;
  spare_host_page_ = host_page;  // stays allocated: the next spare
  record.tier = Tier::kDevice;
  record.page = *device_page;
  device_owner_[*device_page] = state;
  idle_device_.Touch(*device_page);
  ++spills_;
  ++restores_;
  return absl::OkStatus();
}

absl::Status TieredPageStore::Restore(StateId state) {
  GDN_CACHE_INVARIANT(IsLive(state) && records_[state].tier == Tier::kHost);
  if (device_pages_.num_free() == 0 && host_pages_.num_free() == 0) {
    return SwapWithOldest(state);
  }
  absl::StatusOr<int32_t> device_page = TakeDevicePage();
  if (!device_page.ok()) return device_page.status();
  StateRecord& record = records_[state];
  absl::Status copied = backend_->CopyToDevice(
      DevicePage(*device_page), HostPage(record.page), page_bytes_);
  if (!copied.ok()) {
    ReturnDevicePage(*device_page);
    return copied;
  }
  host_owner_[record.page] = kNoState;
  host_pages_.Release(record.page);
  --loose_device_pages_;
  record.tier = Tier::kDevice;
  record.page = *device_page;
  device_owner_[*device_page] = state;
  idle_device_.Touch(*device_page);
  ++restores_;
  return absl::OkStatus();
}

TierRoom TieredPageStore::Room(StateId excluded) const {
  TierRoom room;
  room.free_device = device_pages_.num_free();
  room.idle_device = idle_device_.size();
  if (excluded != kNoState && records_[excluded].tier == Tier::kDevice &&
      idle_device_.Contains(records_[excluded].page)) {
    --room.idle_device;
  }
  room.free_host = host_pages_.num_free();
  return room;
}

absl::Status TieredPageStore::ReadState(StateId state,
                                        std::vector<uint8_t>* bytes) {
  GDN_CACHE_INVARIANT(IsLive(state));
  const StateRecord& record = records_[state];
  bytes->resize(page_bytes_);
  if (record.tier == Tier::kDevice) {
    absl::Status copied =
        backend_->CopyToHost(bytes->data(), DevicePage(record.page),
                             page_bytes_);
    if (!copied.ok()) return copied;
    return backend_->Synchronize();
  }
  // A spill into this host page may still be in flight.
  absl::Status synced = backend_->Synchronize();
  if (!synced.ok()) return synced;
  std::memcpy(bytes->data(), HostPage(record.page), page_bytes_);
  return absl::OkStatus();
}

absl::Status TieredPageStore::WriteState(StateId state,
                                         const std::vector<uint8_t>& bytes) {
  GDN_CACHE_INVARIANT(IsLive(state) &&
                      bytes.size() == static_cast<size_t>(page_bytes_));
  const StateRecord& record = records_[state];
  if (record.tier == Tier::kDevice) {
    return WriteDevicePage(record.page, bytes);
  }
  // Copies out of or into this host page may still be in flight.
  absl::Status synced = backend_->Synchronize();
  if (!synced.ok()) return synced;
  std::memcpy(HostPage(record.page), bytes.data(), page_bytes_);
  return absl::OkStatus();
}

absl::Status TieredPageStore::WriteDevicePage(
    int32_t page, const std::vector<uint8_t>& bytes) {
  GDN_CACHE_INVARIANT(device_pages_.IsAllocated(page) &&
                      bytes.size() == static_cast<size_t>(page_bytes_));
  absl::Status copied =
      backend_->CopyToDevice(DevicePage(page), bytes.data(), page_bytes_);
  if (!copied.ok()) return copied;
  // `bytes` belongs to the caller: it must outlive the copy.
  return backend_->Synchronize();
}

TierStats TieredPageStore::DeviceStats() const {
  TierStats stats;
  stats.pages_total = device_pages_.num_pages();
  stats.pages_used = device_pages_.num_used();
  stats.pages_pinned = pinned_states_ + loose_device_pages_;
  stats.bytes_total = stats.pages_total * page_bytes_;
  stats.bytes_used = stats.pages_used * page_bytes_;
  return stats;
}

TierStats TieredPageStore::HostStats() const {
  const int32_t spare = spare_host_page_ == kNoPage ? 0 : 1;
  TierStats stats;
  stats.pages_total = host_pages_.num_pages() - spare;
  stats.pages_used = host_pages_.num_used() - spare;
  stats.bytes_total = stats.pages_total * page_bytes_;
  stats.bytes_used = stats.pages_used * page_bytes_;
  return stats;
}

std::vector<StateId> TieredPageStore::IdleDeviceStatesOldestFirst() const {
  std::vector<StateId> states;
  for (int32_t page : idle_device_.OldestFirst()) {
    states.push_back(device_owner_[page]);
  }
  return states;
}

absl::Status TieredPageStore::CheckConsistency(
    const std::vector<int32_t>& expected_refs,
    const std::vector<int32_t>& expected_pins, int32_t expected_loose) const {
  auto broken = [](auto&&... parts) {
    return absl::InternalError(absl::StrCat(parts...));
  };
  if (expected_refs.size() != records_.size() ||
      expected_pins.size() != records_.size()) {
    return broken("expected refs / pins sized ", expected_refs.size(), " / ",
                  expected_pins.size(), ", states ", records_.size());
  }
  int32_t device_states = 0, host_states = 0, pinned = 0, idle = 0;
  for (StateId s = 0; s < static_cast<StateId>(records_.size()); ++s) {
    const StateRecord& record = records_[s];
    if (state_ids_.RefCount(s) != expected_refs[s]) {
      return broken("state ", s, " has ", state_ids_.RefCount(s),
                    " refs, its holders count ", expected_refs[s]);
    }
    if (record.pins != expected_pins[s]) {
      return broken("state ", s, " has ", record.pins, " pins, leases count ",
                    expected_pins[s]);
    }
    if (!IsLive(s)) continue;
    if (record.tier == Tier::kDevice) {
      ++device_states;
      if (device_owner_[record.page] != s) {
        return broken("device page ", record.page, " not owned by state ", s);
      }
      if (record.pins > 0) {
        ++pinned;
        if (idle_device_.Contains(record.page)) {
          return broken("pinned state ", s, " is in the LRU order");
        }
      } else {
        ++idle;
        if (!idle_device_.Contains(record.page)) {
          return broken("idle device state ", s, " is not in the LRU order");
        }
      }
    } else {
      ++host_states;
      if (record.pins > 0) return broken("host state ", s, " is pinned");
      if (host_owner_[record.page] != s) {
        return broken("host page ", record.page, " not owned by state ", s);
      }
    }
  }
  for (int32_t page = 0; page < device_pages_.num_pages(); ++page) {
    if (device_pages_.RefCount(page) > 1) {
      return broken("device page ", page, " has ", device_pages_.RefCount(page),
                    " holders");
    }
    if (device_owner_[page] != kNoState && !device_pages_.IsAllocated(page)) {
      return broken("free device page ", page, " has an owner");
    }
  }
  for (int32_t page = 0; page < host_pages_.num_pages(); ++page) {
    if (host_pages_.RefCount(page) > 1) {
      return broken("host page ", page, " has ", host_pages_.RefCount(page),
                    " holders");
    }
    if (page == spare_host_page_) {
      if (host_owner_[page] != kNoState || !host_pages_.IsAllocated(page)) {
        return broken("spare host page ", page, " is owned or free");
      }
      continue;
    }
    if ((host_owner_[page] != kNoState) != host_pages_.IsAllocated(page)) {
      return broken("host page ", page, " owner and allocation disagree");
    }
  }
  if (loose_device_pages_ != expected_loose) {
    return broken(loose_device_pages_, " loose device pages, leases count ",
                  expected_loose);
  }
  if (device_pages_.num_used() != device_states + loose_device_pages_) {
    return broken(device_pages_.num_used(), " device pages used, ",
                  device_states, " states + ", loose_device_pages_, " loose");
  }
  if (HostStats().pages_used != host_states) {
    return broken(HostStats().pages_used, " host pages used, ", host_states,
                  " states");
  }
  if (idle_device_.size() != idle || pinned_states_ != pinned) {
    return broken("LRU holds ", idle_device_.size(), " of ", idle,
                  " idle states; pinned ", pinned_states_, " of ", pinned);
  }
  return absl::OkStatus();
}

}  // namespace gdn
