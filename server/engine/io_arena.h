// IoArena: the engine's host I/O memory. Request threads pack each Forward
// call's inputs into a block of it; the engine downloads each batch's o into
// a block of it, and the response's bytes are sent straight from there. One
// kind of memory for both: the backend's transfer memory (pinned for cuda,
// which the device can also read directly: kernels/backend_stream.h).
//
// Blocks come in power-of-two size classes from 64 KiB up, are allocated
// once (Backend::AllocateHost) and come back to their class's free list when
// their last holder lets go: a steady load allocates nothing and takes no
// page faults. The arena never frees until it is destroyed. Above
// `capacity_bytes` of blocks in use at once, Acquire fails with
// ResourceExhausted naming the numbers (the caller answers the request with
// it); nothing already taken is disturbed.
//
// A later source of input and output bytes (client-registered shared memory
// and CUDA IPC regions) plugs in beside it: the engine reads inputs through
// a pointer the backend can read and writes o through BytesRef-like runs,
// whoever owns the memory.
//
// Large requests are packed by several threads: the arena's copy workers
// (--pack_threads) help the request thread copy and check the payloads of
// requests of share_from_bytes or more (--pack_share_bytes); smaller ones
// of poll_share_from_bytes or more only with threads that poll the workers
// anyway (the engine's, idle: --pack_poll_share_bytes).
//
// Threading: every method is safe from any thread. Blocks are shared_ptrs:
// the last holder (a request thread, the engine, or gRPC dropping a sent
// slice) returns the block, from whichever thread it is on.
#ifndef GDN_SERVER_ENGINE_IO_ARENA_H_
#define GDN_SERVER_ENGINE_IO_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "server/engine/work_sharing_pool.h"

namespace gdn {

class IoArena;

// A block of at least the requested bytes. Its memory stays valid while any
// shared_ptr to it lives (and, through those, while the arena lives).
struct IoBlock {
  char* data = nullptr;
  size_t capacity = 0;
};

struct IoArenaStats {
  int64_t bytes_allocated = 0;  // host memory taken from the backend
  int64_t bytes_in_use = 0;     // capacity of blocks held right now
  int64_t blocks_in_use = 0;
  uint64_t acquires = 0;        // monotone
  uint64_t allocations = 0;     // monotone: acquires that had to allocate
  uint64_t refusals = 0;        // monotone: acquires over capacity
};

class IoArena {
 public:
  static constexpr size_t kMinBlockBytes = 64 << 10;

  // `backend` must outlive the arena (its AllocateHost / FreeHost are safe
  // from any thread). `copy_threads`: threads that help pack large calls
  // (0: each request thread packs alone) on requests of at least
  // `share_from_bytes` tensor bytes; with pollers only from
  // `poll_share_from_bytes` (0: never).
  IoArena(Backend* backend, size_t capacity_bytes, int copy_threads = 0,
          size_t share_from_bytes = size_t{1} << 20, size_t poll_share_from_bytes = 0);
  ~IoArena();  // frees every block; none may be held any more
  IoArena(const IoArena&) = delete;
  IoArena& operator=(const IoArena&) = delete;

  // A block of at least `bytes` (> 0).
  absl::StatusOr<std::shared_ptr<IoBlock>> Acquire(size_t bytes);

  IoArenaStats Stats() const;
  size_t capacity_bytes() const { return capacity_bytes_; }
  WorkSharingPool& copy_workers() { return copy_workers_; }
  size_t share_from_bytes() const { return share_from_bytes_; }
  size_t poll_share_from_bytes() const { return poll_share_from_bytes_; }

 private:
  struct Block;
  static int SizeClass(size_t bytes);
  void Release(Block* block);

  Backend* backend_;
  const size_t capacity_bytes_;
  mutable std::mutex mu_;
  std::vector<std::vector<Block*>> free_;  // [size class] idle blocks
  std::vector<std::unique_ptr<Block>> all_;
  IoArenaStats stats_;
  WorkSharingPool copy_workers_;
  const size_t share_from_bytes_;
  const size_t poll_share_from_bytes_;
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_IO_ARENA_H_
