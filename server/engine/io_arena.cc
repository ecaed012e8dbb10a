#include "server/engine/io_arena.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gdn {

struct IoArena::Block {
  IoBlock block;
  int size_class = 0;
};

IoArena::IoArena(Backend* backend, size_t capacity_bytes, int copy_threads,
                 size_t share_from_bytes, size_t poll_share_from_bytes)
    : backend_(backend),
      capacity_bytes_(capacity_bytes),
      copy_workers_(copy_threads),
      share_from_bytes_(share_from_bytes),
      poll_share_from_bytes_(poll_share_from_bytes) {}

IoArena::~IoArena() {
  for (const std::unique_ptr<Block>& b : all_) backend_->FreeHost(b->block.data);
}

int IoArena::SizeClass(size_t bytes) {
  int c = 0;
  for (size_t size = kMinBlockBytes; size < bytes; size *= 2) ++c;
  return c;
}

absl::StatusOr<std::shared_ptr<IoBlock>> IoArena::Acquire(size_t bytes) {
  const int size_class = SizeClass(bytes);
  const size_t capacity = kMinBlockBytes << size_class;
  Block* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.acquires;
    if (static_cast<size_t>(stats_.bytes_in_use) + capacity > capacity_bytes_) {
      ++stats_.refusals;
      return absl::ResourceExhaustedError(absl::StrCat(
          "server I/O buffers full: ", stats_.bytes_in_use, " of ", capacity_bytes_,
          " bytes held by calls in flight, this call needs ", capacity,
          " more (--io_buffer_bytes); retry later"));
    }
    if (static_cast<size_t>(size_class) < free_.size() && !free_[size_class].empty()) {
      block = free_[size_class].back();
      free_[size_class].pop_back();
    }
    stats_.bytes_in_use += static_cast<int64_t>(capacity);
    ++stats_.blocks_in_use;
  }
  if (block == nullptr) {  // allocated outside the lock: it may take a while
    absl::StatusOr<void*> memory = backend_->AllocateHost(capacity);
    std::lock_guard<std::mutex> lock(mu_);
    if (!memory.ok()) {
      stats_.bytes_in_use -= static_cast<int64_t>(capacity);
      --stats_.blocks_in_use;
      return memory.status();
    }
    all_.push_back(std::make_unique<Block>());
    block = all_.back().get();
    block->block.data = static_cast<char*>(*memory);
    block->block.capacity = capacity;
    block->size_class = size_class;
    stats_.bytes_allocated += static_cast<int64_t>(capacity);
    ++stats_.allocations;
  }
  // The handle's deleter gives the block back instead of freeing it.
  return std::shared_ptr<IoBlock>(&block->block, [this, block](IoBlock*) { Release(block); });
}

void IoArena::Release(Block* block) {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() <= static_cast<size_t>(block->size_class)) free_.resize(block->size_class + 1);
  free_[block->size_class].push_back(block);
  stats_.bytes_in_use -= static_cast<int64_t>(block->block.capacity);
  --stats_.blocks_in_use;
}

IoArenaStats IoArena::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace gdn
