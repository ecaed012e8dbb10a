#include "state_cache/eviction_plan.h"

#include <unordered_map>

namespace gdn {
namespace {

// The room once a set of sessions has dropped its references, kept up to
// date as sessions join or leave the set (O(layers) each).
class EvictionTally {
 public:
  EvictionTally(const TieredPageStore& store, TierRoom room)
      : store_(store), room_(room) {}

  void Add(const SessionRecord& session) {
    for (const LayerEntry& entry : session.layers) {
      if (entry.state == kNoState) continue;
      if (++dropped_[entry.state] == store_.refs(entry.state)) {
        Freed(entry.state, +1);
      }
    }
  }
  void Remove(const SessionRecord& session) {
    for (const LayerEntry& entry : session.layers) {
      if (entry.state == kNoState) continue;
      if (dropped_[entry.state]-- == store_.refs(entry.state)) {
        Freed(entry.state, -1);
      }
    }
  }
  const TierRoom& room() const { return room_; }

 private:
  // A state whose every reference is dropped frees its page. Pinned states
  // are held by a session with a write in flight, never in the set, so a
  // freed device state was idle.
  void Freed(StateId state, int sign) {
    if (store_.tier(state) == Tier::kDevice) {
      room_.free_device += sign;
      room_.idle_device -= sign;
    } else {
      room_.free_host += sign;
    }
  }

  const TieredPageStore& store_;
  TierRoom room_;
  std::unordered_map<StateId, int32_t> dropped_;  // state -> references gone
};

}  // namespace

std::optional<std::vector<std::string>> PlanEviction(
    const SessionTable& sessions, const TieredPageStore& store,
    const std::string& requester, TierRoom room, int wanted,
    bool first_frees_host) {
  EvictionTally tally(store, room);
  auto fits = [&] {
    return ObtainableDevicePages(tally.room(), wanted, first_frees_host) >=
           wanted;
  };
  std::vector<const SessionRecord*> taken;
  for (const std::string& id : sessions.OldestFirst()) {
    if (fits()) break;
    if (id == requester) continue;
    const SessionRecord* session = sessions.Find(id);
    if (session->leases_in_flight > 0) continue;
    taken.push_back(session);
    tally.Add(*session);
  }
  if (!fits()) return std::nullopt;
  // Give back what the plan does not need, most recently used first. (The
  // last one taken is always needed: the plan did not fit before it.)
  std::vector<bool> needed(taken.size(), true);
  for (size_t i = taken.size(); i-- > 0;) {
    tally.Remove(*taken[i]);
    if (fits()) {
      needed[i] = false;
    } else {
      tally.Add(*taken[i]);
    }
  }
  std::vector<std::string> ids;
  for (size_t i = 0; i < taken.size(); ++i) {
    if (needed[i]) ids.push_back(taken[i]->id);
  }
  return ids;
}

}  // namespace gdn
