#include "server/channel/channel_server.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gdn {
namespace {

using channel::ChannelView;
using channel::SlotHeader;

// Writes the outcome into `slot` and hands it back to the client.
void WriteReply(const ChannelView& view, uint32_t slot, const absl::Status& status,
                grpc::ByteBuffer* response) {
  SlotHeader* header = view.slot(slot);
  char* out = view.response(slot);
  const uint64_t capacity = view.response_capacity();
  absl::Status outcome = status;
  uint64_t written = 0;
  if (outcome.ok() && response != nullptr) {
    if (response->Length() > capacity) {
      outcome = absl::InternalError(
          absl::StrCat("the response of ", response->Length(),
                       " bytes exceeds the channel's response capacity of ", capacity));
    } else {
      std::vector<grpc::Slice> slices;
      (void)response->Dump(&slices);
      for (const grpc::Slice& s : slices) {
        std::memcpy(out + written, s.begin(), s.size());
        written += s.size();
      }
    }
  }
  if (!outcome.ok()) {
    written = std::min<uint64_t>(outcome.message().size(), capacity);
    std::memcpy(out, outcome.message().data(), written);
  }
  header->response_bytes = static_cast<uint32_t>(written);
  header->status_code = static_cast<int32_t>(outcome.code());
  channel::Store(&header->state, channel::kResponse);
  if (channel::Load(&header->client_waiting) != 0) channel::FutexWake(&header->state);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChannelServer>> ChannelServer::Start(std::shared_ptr<void> mapping,
                                                                    char* base, uint64_t bytes,
                                                                    ChannelHandler handler,
                                                                    Options options) {
  absl::StatusOr<ChannelView> view = ChannelView::Attach(base, bytes);
  if (!view.ok()) return view.status();
  std::unique_ptr<ChannelServer> server(
      new ChannelServer(std::move(mapping), *view, std::move(handler), options));
  channel::Store(&view->header()->server_open, 1);
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

ChannelServer::ChannelServer(std::shared_ptr<void> mapping, ChannelView view,
                             ChannelHandler handler, Options options)
    : mapping_(std::move(mapping)), view_(view), handler_(std::move(handler)),
      options_(options) {}

ChannelServer::~ChannelServer() { Stop(); }

void ChannelServer::Stop() {
  stop_.store(true);
  channel::Increment(&view_.header()->doorbell);
  channel::FutexWake(&view_.header()->doorbell);
  if (thread_.joinable()) thread_.join();
}

void ChannelServer::Serve() {
  channel::ChannelHeader* header = view_.header();
  absl::Time last_request = absl::Now();
  absl::Time last_client_check = last_request;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (TakePosted()) {
      last_request = absl::Now();
      continue;
    }
    const absl::Time now = absl::Now();
    if (now - last_request < options_.spin) {
      channel::CpuRelax();
      continue;
    }
    if (now - last_client_check >= options_.client_check) {
      last_client_check = now;
      if (ClientGone()) break;
    }
    // Sleep on the doorbell. Announce it first, then read the doorbell and
    // look at the slots again: a client that posts after the read finds
    // server_waiting set and wakes us; one that posted before is seen.
    channel::Store(&header->server_waiting, 1);
    const uint32_t bell = channel::Load(&header->doorbell);
    if (!TakePosted() && !stop_.load()) {
      channel::FutexWait(&header->doorbell, bell, options_.sleep_slice);
    } else {
      last_request = absl::Now();
    }
    channel::Store(&header->server_waiting, 0);
  }
  channel::Store(&header->server_open, 0);
  AnswerPosted(absl::UnavailableError("the channel was closed: no server serves it"));
  finished_.store(true);
}

bool ChannelServer::TakePosted() {
  bool any = false;
  for (uint32_t i = 0; i < view_.slot_count(); ++i) {
    if (channel::Load(&view_.slot(i)->state) == channel::kRequest &&
        channel::CompareExchange(&view_.slot(i)->state, channel::kRequest, channel::kTaken)) {
      Take(i);
      any = true;
    }
  }
  return any;
}

void ChannelServer::Take(uint32_t slot) {
  SlotHeader* header = view_.slot(slot);
  const uint32_t size = header->request_bytes;  // read once
  const uint32_t timeout_us = header->timeout_us;
  auto reply = [mapping = mapping_, view = view_, slot](const absl::Status& status,
                                                        grpc::ByteBuffer* response) {
    WriteReply(view, slot, status, response);
  };
  if (size > view_.request_capacity()) {
    reply(absl::InvalidArgumentError(absl::StrCat("request_bytes ", size,
                                                  " exceeds the slot's request capacity of ",
                                                  view_.request_capacity())),
          nullptr);
    return;
  }
  if (request_buffer_.size() < size) request_buffer_.resize(size);
  std::memcpy(request_buffer_.data(), view_.request(slot), size);
  grpc::Slice bytes(request_buffer_.data(), size, grpc::Slice::STATIC_SLICE);
  absl::StatusOr<wire::WireMessage> message =
      wire::WireMessage::FromByteBuffer(grpc::ByteBuffer(&bytes, 1));
  if (!message.ok()) return reply(message.status(), nullptr);
  ChannelCall call;
  call.request = *std::move(message);
  call.timeout = timeout_us == 0 ? absl::InfiniteDuration() : absl::Microseconds(timeout_us);
  call.response_capacity = view_.response_capacity();
  call.reply = std::move(reply);
  handler_(std::move(call));
}

bool ChannelServer::ClientGone() const {
  const int32_t pid = view_.header()->client_pid;
  return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

void ChannelServer::AnswerPosted(const absl::Status& status) {
  for (uint32_t i = 0; i < view_.slot_count(); ++i) {
    if (channel::CompareExchange(&view_.slot(i)->state, channel::kRequest, channel::kTaken)) {
      WriteReply(view_, i, status, nullptr);
    }
  }
}

}  // namespace gdn
