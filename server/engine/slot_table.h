// Integer slots for the (session, layer) states the engine is working on:
// a slot is assigned when a call is admitted and released when it finishes.
// Admission looks a state up by its key once; planning, staging and lanes
// then work on the ints, so no id string is hashed or copied per iteration.
// Triton's sequence batcher binds each sequence to a slot the same way.
//
// Threading: the engine thread only.
#ifndef GDN_SERVER_ENGINE_SLOT_TABLE_H_
#define GDN_SERVER_ENGINE_SLOT_TABLE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace gdn {

// (session, layer): the unit of state and of ordering.
// (session, layer). The view points at the session id of the call that
// holds the slot (its ForwardSequence), alive while the slot is assigned:
// no string is copied per sequence.
using StateKey = std::pair<absl::string_view, int32_t>;

template <typename Owner>
class SlotTable {
 public:
  struct Slot {
    StateKey key;
    Owner* owner = nullptr;  // the running call that holds it
    int lane = -1;           // lane of its batch in flight, -1 when none
  };

  // The slot of a busy key, or -1.
  int32_t Find(const StateKey& key) const {
    auto it = by_key_.find(key);
    return it == by_key_.end() ? -1 : it->second;
  }
  // `key` must not be busy.
  int32_t Assign(StateKey key, Owner* owner) {
    int32_t id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      id = static_cast<int32_t>(slots_.size());
      slots_.emplace_back();
    }
    slots_[id] = Slot{key, owner, -1};
    by_key_.emplace(key, id);
    return id;
  }
  void Release(int32_t id) {
    by_key_.erase(slots_[id].key);
    slots_[id] = Slot{};
    free_.push_back(id);
  }
  Slot& operator[](int32_t id) { return slots_[id]; }
  const Slot& operator[](int32_t id) const { return slots_[id]; }
  size_t busy() const { return by_key_.size(); }

 private:
  absl::flat_hash_map<StateKey, int32_t> by_key_;
  std::vector<Slot> slots_;
  std::vector<int32_t> free_;
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_SLOT_TABLE_H_
