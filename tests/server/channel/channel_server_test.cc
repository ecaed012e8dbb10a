// ChannelServer (server/channel/channel_server.h) over an anonymous shared
// mapping, with test handlers: requests reach the handler and replies reach
// the right slot from several client threads, through the spinning and the
// sleeping paths; errors carry their code and message; oversized requests
// never reach the handler; Stop answers waiting requests UNAVAILABLE; a
// channel whose client process exited stops serving.
#include "server/channel/channel_server.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn {
namespace {

using ::testing::HasSubstr;

struct TestChannel {
  TestChannel(uint32_t slots, uint64_t capacity, int32_t pid = 0) {
    bytes = channel::ChannelBytes(slots, capacity, capacity);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    base = static_cast<char*>(p);
    mapping = std::shared_ptr<void>(p, [b = bytes](void* q) { munmap(q, b); });
    view = channel::ChannelView::Initialize(base, slots, capacity, capacity, pid);
  }
  absl::StatusOr<channel::Reply> Call(uint32_t slot, const std::string& request,
                                      absl::Duration spin = absl::Milliseconds(1)) {
    return channel::Call(
        view, slot, request.size(),
        [&request](char* out) { std::memcpy(out, request.data(), request.size()); },
        absl::Seconds(60), spin);
  }
  uint64_t bytes;
  char* base;
  std::shared_ptr<void> mapping;
  channel::ChannelView view;
};

std::string Bytes(const wire::WireMessage& m) {
  std::string out;
  m.ForEachPiece({0, m.size()}, [&](const char* p, size_t n) { out.append(p, n); });
  return out;
}

// Replies with the request bytes reversed, on a thread of its own (as the
// engine's completion does).
void ReverseLater(ChannelCall call) {
  std::string s = Bytes(call.request);  // valid only during the handler
  std::thread([call = std::move(call), s]() mutable {
    std::reverse(s.begin(), s.end());
    grpc::Slice slice(s);
    grpc::ByteBuffer response(&slice, 1);
    call.reply(absl::OkStatus(), &response);
  }).detach();
}

TEST(ChannelServerTest, RepliesReachTheirSlotsFromManyThreads) {
  for (const absl::Duration server_spin : {absl::Milliseconds(5), absl::ZeroDuration()}) {
    TestChannel ch(4, 256);
    ChannelServer::Options options;
    options.spin = server_spin;  // zero: the server sleeps between calls
    auto server = ChannelServer::Start(ch.mapping, ch.base, ch.bytes, ReverseLater, options);
    ASSERT_TRUE(server.ok()) << server.status();
    std::vector<std::thread> clients;
    std::atomic<int> good{0};
    for (uint32_t slot = 0; slot < 4; ++slot) {
      clients.emplace_back([&, slot] {
        for (int i = 0; i < 200; ++i) {
          const std::string request = "slot " + std::to_string(slot) + " call " + std::to_string(i);
          // Half the calls sleep for their reply instead of spinning.
          absl::StatusOr<channel::Reply> r =
              ch.Call(slot, request, i % 2 ? absl::ZeroDuration() : absl::Milliseconds(1));
          std::string want = request;
          std::reverse(want.begin(), want.end());
          if (r.ok() && r->code == 0 && r->bytes == want) ++good;
        }
      });
    }
    for (std::thread& t : clients) t.join();
    EXPECT_EQ(good.load(), 800) << "server spin " << server_spin;
    (*server)->Stop();
  }
}

TEST(ChannelServerTest, ErrorsCarryCodeAndMessage) {
  TestChannel ch(1, 128);
  auto server = ChannelServer::Start(
      ch.mapping, ch.base, ch.bytes,
      [](ChannelCall call) {
        call.reply(absl::FailedPreconditionError("expected position 3, got 1"), nullptr);
      },
      {});
  ASSERT_TRUE(server.ok());
  absl::StatusOr<channel::Reply> r = ch.Call(0, "x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(r->bytes, "expected position 3, got 1");
}

TEST(ChannelServerTest, AResponseLargerThanTheSlotIsAnInternalErrorNotAnOverflow) {
  TestChannel ch(1, 64);
  auto server = ChannelServer::Start(
      ch.mapping, ch.base, ch.bytes,
      [](ChannelCall call) {
        grpc::Slice slice(std::string(65, 'x'));
        grpc::ByteBuffer response(&slice, 1);
        call.reply(absl::OkStatus(), &response);
      },
      {});
  ASSERT_TRUE(server.ok());
  absl::StatusOr<channel::Reply> r = ch.Call(0, "x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, static_cast<int>(absl::StatusCode::kInternal));
  EXPECT_THAT(r->bytes, HasSubstr("exceeds"));
}

TEST(ChannelServerTest, ARequestSizeBeyondTheSlotNeverReachesTheHandler) {
  TestChannel ch(1, 64);
  std::atomic<int> handled{0};
  auto server = ChannelServer::Start(
      ch.mapping, ch.base, ch.bytes,
      [&](ChannelCall call) {
        ++handled;
        call.reply(absl::OkStatus(), nullptr);
      },
      {});
  ASSERT_TRUE(server.ok());
  // A client that lies about the size (channel::Call refuses it, so post
  // by hand).
  channel::SlotHeader* slot = ch.view.slot(0);
  slot->request_bytes = 1 << 20;
  channel::Store(&slot->state, channel::kRequest);
  channel::Increment(&ch.view.header()->doorbell);
  channel::FutexWake(&ch.view.header()->doorbell);
  while (channel::Load(&slot->state) != channel::kResponse) channel::CpuRelax();
  EXPECT_EQ(slot->status_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(handled.load(), 0);
}

TEST(ChannelServerTest, StopAnswersWaitingRequestsUnavailable) {
  TestChannel ch(2, 64);
  std::vector<ChannelCall> held;
  std::mutex mu;
  auto server = ChannelServer::Start(
      ch.mapping, ch.base, ch.bytes,
      [&](ChannelCall call) {
        std::lock_guard<std::mutex> lock(mu);
        held.push_back(std::move(call));  // in the engine: answered later
      },
      {});
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(channel::Load(&ch.view.header()->server_open), 1u);
  std::thread taken([&] {
    absl::StatusOr<channel::Reply> r = ch.Call(0, "taken");
    EXPECT_TRUE(r.ok() && r->code == 0);
  });
  while (true) {
    std::lock_guard<std::mutex> lock(mu);
    if (!held.empty()) break;
  }
  (*server)->Stop();
  EXPECT_TRUE((*server)->finished());
  EXPECT_EQ(channel::Load(&ch.view.header()->server_open), 0u);
  // A request posted now is refused at once.
  absl::StatusOr<channel::Reply> late = ch.Call(1, "late");
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
  // The call the handler took still gets its reply after Stop.
  held[0].reply(absl::OkStatus(), nullptr);
  taken.join();
}

TEST(ChannelServerTest, StopsServingWhenItsClientProcessExits) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: the pid is gone
  TestChannel ch(1, 64, child);
  ChannelServer::Options options;
  options.spin = absl::ZeroDuration();
  options.sleep_slice = absl::Milliseconds(5);
  options.client_check = absl::Milliseconds(5);
  auto server = ChannelServer::Start(ch.mapping, ch.base, ch.bytes,
                                     [](ChannelCall call) { call.reply(absl::OkStatus(), nullptr); },
                                     options);
  ASSERT_TRUE(server.ok());
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (!(*server)->finished() && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_TRUE((*server)->finished());
  EXPECT_EQ(channel::Load(&ch.view.header()->server_open), 0u);
}

TEST(ChannelServerTest, StartRefusesABadHeader) {
  TestChannel ch(1, 64);
  std::memcpy(ch.base, "NOTACHAN", 8);
  auto server = ChannelServer::Start(ch.mapping, ch.base, ch.bytes,
                                     [](ChannelCall call) { call.reply(absl::OkStatus(), nullptr); },
                                     {});
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gdn
