#include "state_cache/page_allocator.h"

#include "state_cache/invariant.h"

namespace gdn {

PageAllocator::PageAllocator(int32_t num_pages)
    : ref_counts_(num_pages > 0 ? num_pages : 0, 0) {
  for (int32_t page = 0; page < this->num_pages(); ++page) free_.push(page);
}

std::optional<int32_t> PageAllocator::Allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t page = free_.top();
  free_.pop();
  GDN_CACHE_INVARIANT(ref_counts_[page] == 0);
  ref_counts_[page] = 1;
  ++num_used_;
  return page;
}

void PageAllocator::AddRef(int32_t page) {
  GDN_CACHE_INVARIANT(IsValid(page) && ref_counts_[page] > 0);
  ++ref_counts_[page];
}

bool PageAllocator::Release(int32_t page) {
  GDN_CACHE_INVARIANT(IsValid(page) && ref_counts_[page] > 0);
  if (--ref_counts_[page] > 0) return false;
  free_.push(page);
  --num_used_;
  return true;
}

int32_t PageAllocator::RefCount(int32_t page) const {
  return IsValid(page) ? ref_counts_[page] : 0;
}

}  // namespace gdn
