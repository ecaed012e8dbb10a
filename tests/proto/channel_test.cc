// The same-host channel's layout and wake-ups (proto/channel.h): a header
// written by Initialize attaches; each malformed header is refused naming
// what is wrong; futex waits return on a wake and on a changed word.
#include "proto/channel.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn::channel {
namespace {

using ::testing::HasSubstr;

class Mapping {
 public:
  explicit Mapping(uint64_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    base_ = static_cast<char*>(p);
  }
  ~Mapping() { munmap(base_, bytes_); }
  char* base() { return base_; }
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t bytes_;
  char* base_;
};

TEST(ChannelLayoutTest, InitializedHeaderAttachesWithItsSizes) {
  const uint64_t bytes = ChannelBytes(3, 100, 1000);
  EXPECT_EQ(bytes, kHeaderBytes + 3 * (kSlotHeaderBytes + 128 + 1024));
  Mapping m(bytes);
  ChannelView client = ChannelView::Initialize(m.base(), 3, 100, 1000, 1234);
  absl::StatusOr<ChannelView> server = ChannelView::Attach(m.base(), bytes);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(server->slot_count(), 3u);
  EXPECT_EQ(server->request_capacity(), 128u);
  EXPECT_EQ(server->response_capacity(), 1024u);
  EXPECT_EQ(server->header()->client_pid, 1234);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(server->slot(i), client.slot(i));
    EXPECT_EQ(server->request(i), client.request(i));
    EXPECT_EQ(server->response(i), client.response(i));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(server->slot(i)) % 64, 0u);
  }
  // The last slot's response area ends at the end of the object.
  EXPECT_EQ(server->response(2) + 1024, m.base() + bytes);
}

TEST(ChannelLayoutTest, AttachRefusesEachBadHeader) {
  const uint64_t bytes = ChannelBytes(2, 64, 64);
  Mapping m(bytes);
  auto attach_after = [&](auto&& spoil) {
    ChannelView::Initialize(m.base(), 2, 64, 64, 0);
    spoil(reinterpret_cast<ChannelHeader*>(m.base()));
    return ChannelView::Attach(m.base(), bytes).status();
  };
  EXPECT_THAT(attach_after([](ChannelHeader* h) { h->magic[0] = 'X'; }).message(),
              HasSubstr("GDNCHAN1"));
  EXPECT_THAT(attach_after([](ChannelHeader* h) { h->version = 2; }).message(),
              HasSubstr("version 2"));
  EXPECT_THAT(attach_after([](ChannelHeader* h) { h->slot_count = 0; }).message(),
              HasSubstr("slot_count"));
  EXPECT_THAT(attach_after([](ChannelHeader* h) { h->slot_count = kMaxSlots + 1; }).message(),
              HasSubstr("slot_count"));
  EXPECT_THAT(attach_after([](ChannelHeader* h) { h->request_capacity = 100; }).message(),
              HasSubstr("request_capacity"));
  EXPECT_THAT(
      attach_after([](ChannelHeader* h) { h->response_capacity = kMaxCapacity + 64; }).message(),
      HasSubstr("response_capacity"));
  EXPECT_THAT(attach_after([](ChannelHeader* h) { h->slot_count = 3; }).message(),
              HasSubstr("the object has"));
  EXPECT_FALSE(ChannelView::Attach(m.base(), kHeaderBytes - 1).ok());
  for (const absl::Status& s :
       {attach_after([](ChannelHeader* h) { h->version = 9; }),
        attach_after([](ChannelHeader* h) { h->slot_count = 3; })}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(attach_after([](ChannelHeader*) {}).ok());
}

TEST(ChannelFutexTest, WaitReturnsWhenTheWordAlreadyDiffers) {
  alignas(4) uint32_t word = 5;
  const absl::Time start = absl::Now();
  FutexWait(&word, 4, absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST(ChannelFutexTest, WakeEndsAWait) {
  alignas(4) uint32_t word = 0;
  std::atomic<bool> woke{false};
  std::thread waiter([&] {
    while (Load(&word) == 0) FutexWait(&word, 0, absl::Seconds(30));
    woke = true;
  });
  Store(&word, 1);
  FutexWake(&word);
  waiter.join();
  EXPECT_TRUE(woke.load());
}

TEST(ChannelCallTest, RefusesBadSlotsAndOversizedRequestsWithoutPosting) {
  const uint64_t bytes = ChannelBytes(1, 64, 64);
  Mapping m(bytes);
  ChannelView view = ChannelView::Initialize(m.base(), 1, 64, 64, 0);
  Store(&view.header()->server_open, 1);
  auto write = [](char*) {};
  EXPECT_EQ(Call(view, 1, 8, write, absl::Seconds(1), absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Call(view, 0, 65, write, absl::Seconds(1), absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Load(&view.slot(0)->state), kFree);
  // No server: Unavailable, nothing posted.
  Store(&view.header()->server_open, 0);
  EXPECT_EQ(Call(view, 0, 8, write, absl::Seconds(1), absl::ZeroDuration()).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Load(&view.slot(0)->state), kFree);
}

TEST(ChannelCallTest, TimesOutWhenNobodyAnswersAndTheSlotStaysBusy) {
  const uint64_t bytes = ChannelBytes(1, 64, 64);
  Mapping m(bytes);
  ChannelView view = ChannelView::Initialize(m.base(), 1, 64, 64, 0);
  Store(&view.header()->server_open, 1);
  auto write = [](char* out) { std::memcpy(out, "ping", 4); };
  absl::StatusOr<Reply> r = Call(view, 0, 4, write, absl::Milliseconds(20), absl::ZeroDuration());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Load(&view.slot(0)->state), kRequest);
  // A late reply frees the slot for the next call, which drops it.
  std::memcpy(view.response(0), "late", 4);
  view.slot(0)->response_bytes = 4;
  Store(&view.slot(0)->state, kResponse);
  std::thread server([&] {
    while (Load(&view.slot(0)->state) != kRequest) CpuRelax();
    std::memcpy(view.response(0), "pong", 4);
    view.slot(0)->status_code = 0;
    Store(&view.slot(0)->state, kResponse);
    FutexWake(&view.slot(0)->state);
  });
  r = Call(view, 0, 4, write, absl::Seconds(30), absl::ZeroDuration());
  server.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bytes, "pong");
  EXPECT_EQ(Load(&view.slot(0)->state), kFree);
}

}  // namespace
}  // namespace gdn::channel
