// Fuzz target: the server's side of the same-host channel's header
// (proto/channel.h: ChannelView::Attach) over an arbitrary object.
//
// Input: 4 bytes choosing the object's size (4096 + n % 1 MiB, so that up
// to kMaxSlots small slots fit), then the object's first bytes (the rest is
// zero, as ftruncate leaves it). The object is a heap buffer of exactly
// that size, so ASan sees any access past its end.
//
// Properties, beyond "no crash, no sanitizer finding":
//   - after Attach accepts, every slot header, request area and response
//     area it hands out lies inside the object, and every byte of them can
//     be touched;
//   - the view keeps the counts and sizes it checked even when the client
//     rewrites the header afterwards (the object is shared with it);
//   - a channel Initialize wrote attaches with the same counts and sizes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "proto/channel.h"
#include "tests/fuzz/fuzz_check.h"

namespace gdn::channel {
namespace {

// Writes the first and last byte of [p, p + n), which must lie in [base, end).
void Touch(char* base, char* end, char* p, uint64_t n) {
  FUZZ_CHECK(p >= base && n <= static_cast<uint64_t>(end - p));
  if (n == 0) return;
  p[0] ^= 1;
  p[n - 1] ^= 1;
}

void FuzzAttach(const uint8_t* data, size_t size) {
  uint32_t selector = 0;
  std::memcpy(&selector, data, sizeof(selector));
  data += sizeof(selector);
  size -= sizeof(selector);
  const uint64_t bytes = kHeaderBytes + selector % (uint64_t{1} << 20);
  std::unique_ptr<char[]> object(new char[bytes]());
  std::memcpy(object.get(), data, std::min<uint64_t>(size, bytes));
  char* base = object.get();
  char* end = base + bytes;

  absl::StatusOr<ChannelView> view = ChannelView::Attach(base, bytes);
  if (!view.ok()) {
    FUZZ_CHECK(view.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  const uint32_t slots = view->slot_count();
  const uint64_t request = view->request_capacity();
  const uint64_t response = view->response_capacity();
  FUZZ_CHECK(slots >= 1 && slots <= kMaxSlots);
  FUZZ_CHECK(ChannelBytes(slots, request, response) <= bytes);
  // The client rewrites its header: the view must not follow.
  view->header()->slot_count = ~slots;
  view->header()->request_capacity = ~request;
  view->header()->response_capacity = 0;
  FUZZ_CHECK(view->slot_count() == slots && view->request_capacity() == request &&
             view->response_capacity() == response);
  for (uint32_t i = 0; i < slots; ++i) {
    Touch(base, end, reinterpret_cast<char*>(view->slot(i)), kSlotHeaderBytes);
    Touch(base, end, view->request(i), request);
    Touch(base, end, view->response(i), response);
    FUZZ_CHECK(view->request(i) == reinterpret_cast<char*>(view->slot(i)) + kSlotHeaderBytes);
    FUZZ_CHECK(view->response(i) == view->request(i) + request);
  }
}

void FuzzInitialize(const uint8_t* data, size_t size) {
  if (size < 3) return;
  const uint32_t slots = 1 + data[0] % 16;
  const uint64_t request = 1 + data[1] * uint64_t{37};  // rounded up to 64 by Initialize
  const uint64_t response = 1 + data[2] * uint64_t{53};
  const uint64_t bytes = ChannelBytes(slots, request, response);
  std::unique_ptr<char[]> object(new char[bytes]());
  const ChannelView made = ChannelView::Initialize(object.get(), slots, request, response, 0);
  absl::StatusOr<ChannelView> attached = ChannelView::Attach(object.get(), bytes);
  FUZZ_CHECK(attached.ok());
  FUZZ_CHECK(attached->slot_count() == made.slot_count() &&
             attached->request_capacity() == made.request_capacity() &&
             attached->response_capacity() == made.response_capacity());
  FUZZ_CHECK(made.request_capacity() >= request && made.request_capacity() % 64 == 0);
  FUZZ_CHECK(!ChannelView::Attach(object.get(), bytes - 1).ok());  // one byte short
  char* last = attached->response(slots - 1) + attached->response_capacity();
  FUZZ_CHECK(last == object.get() + bytes);
}

}  // namespace
}  // namespace gdn::channel

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  gdn::channel::FuzzAttach(data, size);
  gdn::channel::FuzzInitialize(data + 4, size - 4);
  return 0;
}
