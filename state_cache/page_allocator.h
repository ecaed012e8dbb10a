// A fixed set of page ids [0, num_pages) with a free list and a reference
// count per id. Pure bookkeeping: it never touches the memory the ids stand
// for, so it is host-only and tested without any backend.
//
// Deterministic on purpose: Allocate() always hands out the lowest free id,
// so the same sequence of calls gives the same ids (tests assert exact ids,
// and a fragmented pool refills from the bottom).
#ifndef GDN_STATE_CACHE_PAGE_ALLOCATOR_H_
#define GDN_STATE_CACHE_PAGE_ALLOCATOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <vector>

namespace gdn {

class PageAllocator {
 public:
  explicit PageAllocator(int32_t num_pages);

  // The lowest free id, now with reference count 1; nullopt when none is free.
  std::optional<int32_t> Allocate();
  // One more holder of an allocated id.
  void AddRef(int32_t page);
  // One holder fewer; true when that was the last and the id is free again.
  bool Release(int32_t page);

  int32_t RefCount(int32_t page) const;  // 0 for a free id
  bool IsAllocated(int32_t page) const { return RefCount(page) > 0; }
  bool IsValid(int32_t page) const { return page >= 0 && page < num_pages(); }

  int32_t num_pages() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_used() const { return num_used_; }
  int32_t num_free() const { return num_pages() - num_used_; }

 private:
  std::vector<int32_t> ref_counts_;  // [num_pages], 0 = free
  // Min-heap of the free ids: the top is the lowest.
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<int32_t>>
      free_;
  int32_t num_used_ = 0;
};

}  // namespace gdn

#endif  // GDN_STATE_CACHE_PAGE_ALLOCATOR_H_
