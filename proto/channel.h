// The same-host Forward channel: Forward calls through a POSIX shared-memory
// object instead of gRPC, for model runners on the server's host that call
// once per layer and cannot afford a socket round trip per call. gRPC stays
// the control plane (OpenChannel / CloseChannel, sessions, regions); the
// channel carries only Forward requests and responses, in the same wire
// format as the RPC (forward_wire.h). Tensors may be inline in the request
// or, better, references into registered regions (RegionRef, o_region), so
// a decode request is a few hundred bytes.
//
// Layout (little-endian, every offset fixed; the client creates and sizes
// the object, the server checks everything it reads):
//
//   [0, 4096)        ChannelHeader
//   slot i at 4096 + i * SlotStride(header):
//     [0, 64)                      SlotHeader
//     [64, 64 + request_capacity)  the request (ForwardRequest bytes)
//     [.., .. + response_capacity) the response (ForwardResponse bytes,
//                                  or the error message when status != 0)
//
// One slot holds one call at a time and belongs to one client thread. Its
// state word moves FREE -> REQUEST (client) -> TAKEN (server) -> RESPONSE
// (server) -> FREE (client). Wake-ups: the client bumps the header's
// doorbell after posting and wakes the server only when it sleeps
// (server_waiting); the server wakes a slot's client only when that client
// sleeps (client_waiting). Both sides spin first: a decode layer call comes
// back in tens of microseconds, sooner than a futex wake-up would.
#ifndef GDN_PROTO_CHANNEL_H_
#define GDN_PROTO_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gdn::channel {

inline constexpr char kMagic[8] = {'G', 'D', 'N', 'C', 'H', 'A', 'N', '1'};
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 4096;
inline constexpr size_t kSlotHeaderBytes = 64;
inline constexpr uint32_t kMaxSlots = 1024;
inline constexpr uint64_t kMaxCapacity = uint64_t{1} << 30;  // per area

enum SlotState : uint32_t { kFree = 0, kRequest = 1, kTaken = 2, kResponse = 3 };

struct ChannelHeader {
  char magic[8];
  uint32_t version;
  uint32_t slot_count;
  uint64_t request_capacity;   // bytes per slot, a multiple of 64
  uint64_t response_capacity;  // bytes per slot, a multiple of 64
  int32_t client_pid;          // the server closes the channel when it exits; 0: not watched
  uint32_t reserved[7];
  alignas(64) uint32_t doorbell;   // bumped by the client after each posted request
  alignas(64) uint32_t server_waiting;  // 1 while the server sleeps on the doorbell
  alignas(64) uint32_t server_open;     // 1 while a server serves the channel
};
static_assert(sizeof(ChannelHeader) <= kHeaderBytes);

struct SlotHeader {
  uint32_t state;           // SlotState
  uint32_t client_waiting;  // 1 while the client sleeps on `state`
  uint32_t request_bytes;   // written by the client before REQUEST
  uint32_t response_bytes;  // written by the server before RESPONSE
  int32_t status_code;      // gRPC status code of the call; 0 OK
  uint32_t timeout_us;      // the call's deadline from when the server takes it; 0: none
  uint32_t reserved[10];
};
static_assert(sizeof(SlotHeader) == kSlotHeaderBytes);

// Atomic access to words of shared memory (GCC builtins: no std::atomic
// object lives in the mapping).
inline uint32_t Load(const uint32_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
inline void Store(uint32_t* word, uint32_t value) {
  __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
}
inline uint32_t Increment(uint32_t* word) {
  return __atomic_add_fetch(word, 1, __ATOMIC_SEQ_CST);
}
inline bool CompareExchange(uint32_t* word, uint32_t expected, uint32_t desired) {
  return __atomic_compare_exchange_n(word, &expected, desired, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST);
}
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Sleeps while *word == expected, for at most `timeout` (process-shared
// futex: the two ends are different processes). Spurious returns happen;
// callers re-check.
void FutexWait(uint32_t* word, uint32_t expected, absl::Duration timeout);
// Wakes every sleeper on `word`.
void FutexWake(uint32_t* word);

// Bytes of the object for these sizes (capacities rounded up to 64).
uint64_t ChannelBytes(uint32_t slot_count, uint64_t request_capacity, uint64_t response_capacity);

// A mapped channel: pointers into the mapping, which the caller keeps alive.
class ChannelView {
 public:
  // Client side: writes a fresh header into `base` (ChannelBytes() long,
  // zeroed by ftruncate) for these sizes.
  static ChannelView Initialize(char* base, uint32_t slot_count, uint64_t request_capacity,
                                uint64_t response_capacity, int32_t client_pid);
  // Server side: checks the header against the object's size (`bytes`):
  // InvalidArgument naming what is wrong (magic, version, counts, sizes).
  static absl::StatusOr<ChannelView> Attach(char* base, uint64_t bytes);

  ChannelView() = default;
  ChannelHeader* header() const { return header_; }
  uint32_t slot_count() const { return slot_count_; }
  uint64_t request_capacity() const { return request_capacity_; }
  uint64_t response_capacity() const { return response_capacity_; }
  SlotHeader* slot(uint32_t i) const {
    return reinterpret_cast<SlotHeader*>(base_ + kHeaderBytes + i * stride_);
  }
  char* request(uint32_t i) const { return reinterpret_cast<char*>(slot(i)) + kSlotHeaderBytes; }
  char* response(uint32_t i) const { return request(i) + request_capacity_; }

 private:
  char* base_ = nullptr;
  ChannelHeader* header_ = nullptr;
  // Read once: the client may rewrite its header; the server must never use
  // a count or size that changed after Attach checked it.
  uint32_t slot_count_ = 0;
  uint64_t request_capacity_ = 0;
  uint64_t response_capacity_ = 0;
  uint64_t stride_ = 0;
};

// What came back in a slot: the call's gRPC status code, and the response
// bytes (code 0) or the error message.
struct Reply {
  int32_t code = 0;
  std::string bytes;
};

// Client side: one call through `slot` (owned by the calling thread).
// `write` fills the slot's request area with the `size` request bytes.
// Polls for `spin`, then sleeps until the reply or `timeout`:
// DeadlineExceeded then, and the slot stays busy until that reply comes
// (the next Call on the slot waits for it and drops it). Unavailable when no
// server serves the channel; InvalidArgument for a slot out of range or a
// request larger than the slot.
absl::StatusOr<Reply> Call(const ChannelView& view, uint32_t slot, uint64_t size,
                           const std::function<void(char*)>& write, absl::Duration timeout,
                           absl::Duration spin);

}  // namespace gdn::channel

#endif  // GDN_PROTO_CHANNEL_H_
