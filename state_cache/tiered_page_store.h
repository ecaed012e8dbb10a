// The stored states of the state cache and where their bytes live.
//
// Two tiers of equal pages, each one allocation addressed by page id:
//   device: backend->Allocate(device_pages * page_bytes), the pool the
//           kernels read and write (page p at base + p * page_bytes);
//   host:   backend->AllocateHost((host_pages + 1) * page_bytes), which takes
//           the least recently used idle device states when the device is
//           full. The extra page is a spare no state owns: with both tiers
//           full, a restore swaps (idle device state -> spare, host state ->
//           its device page) and the restored state's host page becomes the
//           spare, so a state on the host never needs a net new page.
//
// A stored state (StateId) is one page in one tier holding one recurrent
// state, referenced by `refs` (session, layer) entries (more than one after a
// fork: copy-on-write sharing) and pinned by `pins` in-flight writes. The id
// stays the same when the state moves between tiers, so every sharer sees the
// move. Invariants (CheckConsistency):
//   - a pinned state is on the device and not in the LRU order;
//   - an idle device state is in the LRU order, exactly once;
//   - a device page is free, holds exactly one state, or is "loose" (handed
//     out by TakeDevicePage for a kernel to write, not yet adopted).
//
// Copies are issued on the backend's stream in order, so a page freed after
// a copy out of it may be reused at once by a later copy or kernel.
// Not thread-safe: owned by the StateCache (the engine thread).
#ifndef GDN_STATE_CACHE_TIERED_PAGE_STORE_H_
#define GDN_STATE_CACHE_TIERED_PAGE_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/gdn_params.h"
#include "state_cache/lru_order.h"
#include "state_cache/page_allocator.h"
#include "state_cache/state_cache.h"

namespace gdn {

using StateId = int32_t;
inline constexpr StateId kNoState = -1;

// What the tiers have room for right now, as counts of pages.
struct TierRoom {
  int64_t free_device = 0;
  int64_t idle_device = 0;  // unpinned device states: could be spilled
  int64_t free_host = 0;
};

// How many of `wanted` device pages can be had one after another from
// `room`: each takes a free device page, else spills an idle device state
// into a free host page. With `first_frees_host`, the first page restores a
// host state, whose host page is free once it has moved (with no free page
// in either tier, that restore is a swap with an idle device state).
int ObtainableDevicePages(TierRoom room, int wanted, bool first_frees_host);

class TieredPageStore {
 public:
  // host_pages may be 0 (no host tier: nothing can be spilled).
  static absl::StatusOr<std::unique_ptr<TieredPageStore>> Create(
      Backend* backend, int64_t page_bytes, int32_t device_pages,
      int32_t host_pages, StateDType dtype);
  ~TieredPageStore();
  TieredPageStore(const TieredPageStore&) = delete;
  TieredPageStore& operator=(const TieredPageStore&) = delete;

  StatePoolView pool() const;
  int64_t page_bytes() const { return page_bytes_; }

  // --- Device pages for kernels to write ("loose" until adopted).
  // The lowest free device page, else the page of the least recently used
  // idle state after spilling that state to the host tier.
  // ResourceExhausted when neither is possible.
  absl::StatusOr<int32_t> TakeDevicePage();
  // A loose page back to the free list (the write did not happen).
  void ReturnDevicePage(int32_t page);
  // A loose page that now holds a state: a new state with one reference,
  // idle and most recently used.
  StateId AdoptDevicePage(int32_t page);

  // --- Stored states.
  void AddRef(StateId state);
  // Drops one reference; the last one frees the state's page.
  void Release(StateId state);
  // In-flight writes: a pinned state is never spilled. Pin requires the
  // state on the device; the last Unpin makes it the most recently used.
  void Pin(StateId state);
  void Unpin(StateId state);
  // Marks an idle device state most recently used (no-op when pinned).
  void Touch(StateId state);
  // Moves a host state to the device (TakeDevicePage may spill another;
  // with both tiers full it swaps with the least recently used idle device
  // state, never a pinned one). On failure every state is where it was,
  // intact.
  absl::Status Restore(StateId state);

  Tier tier(StateId state) const { return records_[state].tier; }
  int32_t page(StateId state) const { return records_[state].page; }
  int32_t refs(StateId state) const { return state_ids_.RefCount(state); }
  int32_t pins(StateId state) const { return records_[state].pins; }
  bool IsLive(StateId state) const { return state_ids_.IsAllocated(state); }

  // Room for planning, not counting `excluded` (a state the caller is about
  // to pin) among the idle device states.
  TierRoom Room(StateId excluded) const;

  // --- Bytes (page_bytes of them). These synchronise the backend.
  absl::Status ReadState(StateId state, std::vector<uint8_t>* bytes);
  // Overwrites the state's page in its tier (the caller makes sure it is not
  // shared and not pinned).
  absl::Status WriteState(StateId state, const std::vector<uint8_t>& bytes);
  absl::Status WriteDevicePage(int32_t page, const std::vector<uint8_t>& bytes);

  // --- Observation.
  TierStats DeviceStats() const;
  TierStats HostStats() const;
  uint64_t spills() const { return spills_; }
  uint64_t restores() const { return restores_; }
  // Device state ids from the least to the most recently used idle one.
  std::vector<StateId> IdleDeviceStatesOldestFirst() const;
  // Checks the invariants above; `expected_refs[s]` / `expected_pins[s]` are
  // the references / pins the owner counts for every state id (size
  // device_pages + host_pages), `expected_loose` its loose device pages.
  absl::Status CheckConsistency(const std::vector<int32_t>& expected_refs,
                                const std::vector<int32_t>& expected_pins,
                                int32_t expected_loose) const;
  int32_t max_states() const { return state_ids_.num_pages(); }

 private:
  struct StateRecord {
    Tier tier = Tier::kDevice;
    int32_t page = -1;  // page id in `tier`
    int32_t pins = 0;
  };

  TieredPageStore(Backend* backend, int64_t page_bytes, int32_t device_pages,
                  int32_t host_pages, StateDType dtype);
  uint8_t* DevicePage(int32_t page) const;
  uint8_t* HostPage(int32_t page) const;
  // Copies the least recently used idle device state to a new host page.
  absl::Status SpillOldest();
  // Restore with both tiers full: exchanges the host state with the least
  // recently used idle device state through the spare host page.
  absl::Status SwapWithOldest(StateId state);
  void FreePageOf(StateId state);

  Backend* backend_;
  const int64_t page_bytes_;
  const StateDType dtype_;
  void* device_base_ = nullptr;  // [device_pages, page_bytes]
  void* host_base_ = nullptr;    // [host_pages + 1, page_bytes]

  PageAllocator device_pages_;  // one holder each: a state or a loose write
  // One holder each: a state or the spare (host_pages + 1 ids, none at all
  // without a host tier).
  PageAllocator host_pages_;
  static constexpr int32_t kNoPage = -1;
  int32_t spare_host_page_ = kNoPage;  // allocated, owned by no state
  // Live states can never outnumber the pages, so ids come from an allocator
  // of device_pages + host_pages ids whose counts are the sharing references.
  PageAllocator state_ids_;
  std::vector<StateRecord> records_;    // [device_pages + host_pages]
  std::vector<StateId> device_owner_;   // [device_pages], kNoState: free/loose
  std::vector<StateId> host_owner_;     // [host_pages + 1], kNoState: free/spare
  LruOrder idle_device_;                // over device page ids
  int32_t loose_device_pages_ = 0;
  int32_t pinned_states_ = 0;
  uint64_t spills_ = 0;
  uint64_t restores_ = 0;
};

}  // namespace gdn

#endif  // GDN_STATE_CACHE_TIERED_PAGE_STORE_H_
