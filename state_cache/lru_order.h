// Recency order over a subset of the ids [0, capacity): the state cache keeps
// its idle (unpinned) device pages here, so that the least recently used one
// is the first to be spilled to the host tier.
//
// An intrusive doubly linked list over two arrays indexed by id, so Touch,
// Remove and PopOldest are O(1) and allocate nothing after construction.
#ifndef GDN_STATE_CACHE_LRU_ORDER_H_
#define GDN_STATE_CACHE_LRU_ORDER_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace gdn {

class LruOrder {
 public:
  explicit LruOrder(int32_t capacity);

  // Makes `id` the most recently used (inserting it when absent).
  void Touch(int32_t id);
  // Takes `id` out of the order; no-op when absent.
  void Remove(int32_t id);
  bool Contains(int32_t id) const;

  // The least recently used id, without / with taking it out.
  std::optional<int32_t> Oldest() const;
  std::optional<int32_t> PopOldest();

  // Ids from the oldest to the newest (tests and consistency checks).
  std::vector<int32_t> OldestFirst() const;

  int32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int32_t capacity() const { return static_cast<int32_t>(next_.size()) - 1; }

 private:
  // Slot `capacity` is the sentinel: next_[sentinel] is the oldest id,
  // prev_[sentinel] the newest. kAbsent marks ids not in the order.
  static constexpr int32_t kAbsent = -1;
  int32_t sentinel() const { return capacity(); }
  void Unlink(int32_t id);

  std::vector<int32_t> next_;  // [capacity + 1]
  std::vector<int32_t> prev_;  // [capacity + 1]
  int32_t size_ = 0;
};

}  // namespace gdn

#endif  // GDN_STATE_CACHE_LRU_ORDER_H_
