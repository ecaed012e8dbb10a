#include "proto/channel.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"

namespace gdn::channel {
namespace {

uint64_t RoundUp64(uint64_t n) { return (n + 63) / 64 * 64; }

uint64_t Stride(uint64_t request_capacity, uint64_t response_capacity) {
  return kSlotHeaderBytes + request_capacity + response_capacity;
}

}  // namespace

void FutexWait(uint32_t* word, uint32_t expected, absl::Duration timeout) {
  const timespec ts = absl::ToTimespec(timeout);
  // FUTEX_WAIT (not _PRIVATE): the word is shared between processes.
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWake(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

uint64_t ChannelBytes(uint32_t slot_count, uint64_t request_capacity,
                      uint64_t response_capacity) {
  return kHeaderBytes +
         slot_count * Stride(RoundUp64(request_capacity), RoundUp64(response_capacity));
}

ChannelView ChannelView::Initialize(char* base, uint32_t slot_count, uint64_t request_capacity,
                                    uint64_t response_capacity, int32_t client_pid) {
  auto* header = reinterpret_cast<ChannelHeader*>(base);
  std::memcpy(header->magic, kMagic, sizeof(kMagic));
  header->version = kVersion;
  header->slot_count = slot_count;
  header->request_capacity = RoundUp64(request_capacity);
  header->response_capacity = RoundUp64(response_capacity);
  header->client_pid = client_pid;
  ChannelView view;
  view.base_ = base;
  view.header_ = header;
  view.slot_count_ = slot_count;
  view.request_capacity_ = header->request_capacity;
  view.response_capacity_ = header->response_capacity;
  view.stride_ = Stride(view.request_capacity_, view.response_capacity_);
  return view;
}

absl::StatusOr<ChannelView> ChannelView::Attach(char* base, uint64_t bytes) {
  if (bytes < kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("channel: ", bytes, " bytes cannot hold the ", kHeaderBytes, "-byte header"));
  }
  const auto* header = reinterpret_cast<const ChannelHeader*>(base);
  // Each field read once, into locals: the client may be writing them.
  char magic[8];
  std::memcpy(magic, header->magic, sizeof(magic));
  const uint32_t version = header->version;
  const uint32_t slots = header->slot_count;
  const uint64_t request_capacity = header->request_capacity;
  const uint64_t response_capacity = header->response_capacity;
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError("channel: the object does not start with GDNCHAN1");
  }
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("channel: version ", version, "; this server speaks ", kVersion));
  }
  if (slots < 1 || slots > kMaxSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("channel: slot_count must be in [1, ", kMaxSlots, "], got ", slots));
  }
  for (const auto& [name, capacity] :
       {std::pair<const char*, uint64_t>{"request_capacity", request_capacity},
        {"response_capacity", response_capacity}}) {
    if (capacity < 64 || capacity > kMaxCapacity || capacity % 64 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("channel: ", name,
                                                     " must be a multiple of 64 in [64, ",
                                                     kMaxCapacity, "], got ", capacity));
    }
  }
  const uint64_t needed = ChannelBytes(slots, request_capacity, response_capacity);
  if (needed > bytes) {
    return absl::InvalidArgumentError(absl::StrCat("channel: ", slots, " slots of ",
                                                   request_capacity, " + ", response_capacity,
                                                   " bytes need ", needed, " bytes; the object has ",
                                                   bytes));
  }
  ChannelView view;
  view.base_ = base;
  view.header_ = reinterpret_cast<ChannelHeader*>(base);
  view.slot_count_ = slots;
  view.request_capacity_ = request_capacity;
  view.response_capacity_ = response_capacity;
  view.stride_ = Stride(request_capacity, response_capacity);
  return view;
}

namespace {

// Waits until `slot` holds a reply (true) or `until` passes (false).
bool AwaitReply(SlotHeader* header, absl::Time until, absl::Duration spin) {
  const absl::Time spin_until = std::min(until, absl::Now() + spin);
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (Load(&header->state) == kResponse) return true;
      CpuRelax();
    }
    const absl::Time now = absl::Now();
    if (now >= until) return false;
    if (now < spin_until) continue;
    // Sleep on the state word. The server wakes us only if we say so; the
    // futex compares the word first, so a reply that landed after the load
    // below is not missed.
    Store(&header->client_waiting, 1);
    const uint32_t state = Load(&header->state);
    if (state != kResponse) {
      FutexWait(&header->state, state, std::min(until - now, absl::Milliseconds(100)));
    }
    Store(&header->client_waiting, 0);
  }
}

}  // namespace

absl::StatusOr<Reply> Call(const ChannelView& view, uint32_t slot, uint64_t size,
                           const std::function<void(char*)>& write, absl::Duration timeout,
                           absl::Duration spin) {
  if (slot >= view.slot_count()) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot ", slot, " of a channel with ", view.slot_count(), " slots"));
  }
  if (size > view.request_capacity()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request of ", size, " bytes exceeds the slot's capacity of ",
                     view.request_capacity(), " (name regions instead of inline tensors)"));
  }
  const absl::Time until = absl::Now() + timeout;
  SlotHeader* header = view.slot(slot);
  // An earlier call that timed out owns the slot until its reply comes.
  if (Load(&header->state) != kFree) {
    if (!AwaitReply(header, until, spin)) {
      return absl::DeadlineExceededError("the slot is still busy with an earlier call");
    }
    Store(&header->state, kFree);
  }
  if (Load(&view.header()->server_open) == 0) {
    return absl::UnavailableError("no server serves this channel (closed, or the server stopped)");
  }
  write(view.request(slot));
  header->request_bytes = static_cast<uint32_t>(size);
  header->timeout_us = timeout >= absl::Seconds(4000)
                           ? 0
                           : static_cast<uint32_t>(absl::ToInt64Microseconds(timeout));
  Store(&header->state, kRequest);
  Increment(&view.header()->doorbell);
  if (Load(&view.header()->server_waiting) != 0) FutexWake(&view.header()->doorbell);
  if (!AwaitReply(header, until, spin)) {
    return absl::DeadlineExceededError(
        absl::StrCat("no reply through the channel within ", absl::FormatDuration(timeout)));
  }
  Reply reply;
  reply.code = header->status_code;
  const uint64_t bytes = std::min<uint64_t>(header->response_bytes, view.response_capacity());
  reply.bytes.assign(view.response(slot), bytes);
  Store(&header->state, kFree);
  return reply;
}

}  // namespace gdn::channel
