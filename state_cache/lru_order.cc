#include "state_cache/lru_order.h"

#include "state_cache/invariant.h"

namespace gdn {

LruOrder::LruOrder(int32_t capacity)
    : next_((capacity > 0 ? capacity : 0) + 1, kAbsent),
      prev_((capacity > 0 ? capacity : 0) + 1, kAbsent) {
  next_[sentinel()] = sentinel();
  prev_[sentinel()] = sentinel();
}

bool LruOrder::Contains(int32_t id) const {
  return id >= 0 && id < capacity() && next_[id] != kAbsent;
}

void LruOrder::Unlink(int32_t id) {
  next_[prev_[id]] = next_[id];
  prev_[next_[id]] = prev_[id];
  next_[id] = kAbsent;
  prev_[id] = kAbsent;
  --size_;
}

void LruOrder::Touch(int32_t id) {
  GDN_CACHE_INVARIANT(id >= 0 && id < capacity());
  if (Contains(id)) Unlink(id);
  // Link between the newest and the sentinel.
  const int32_t newest = prev_[sentinel()];
  next_[newest] = id;
  prev_[id] = newest;
  next_[id] = sentinel();
  prev_[sentinel()] = id;
  ++size_;
}

void LruOrder::Remove(int32_t id) {
  if (Contains(id)) Unlink(id);
}

std::optional<int32_t> LruOrder::Oldest() const {
  if (empty()) return std::nullopt;
  return next_[sentinel()];
}

std::optional<int32_t> LruOrder::PopOldest() {
  std::optional<int32_t> oldest = Oldest();
  if (oldest) Unlink(*oldest);
  return oldest;
}

std::vector<int32_t> LruOrder::OldestFirst() const {
  std::vector<int32_t> ids;
  ids.reserve(size_);
  for (int32_t id = next_[sentinel()]; id != sentinel(); id = next_[id]) {
    ids.push_back(id);
  }
  return ids;
}

}  // namespace gdn
