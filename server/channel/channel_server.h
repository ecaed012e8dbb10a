// Serves one same-host Forward channel (proto/channel.h): a thread of its own
// watches the channel's slots, hands each posted request to the handler and
// writes the handler's reply back into the slot, waking the client only if
// it sleeps. After a call it spins for `spin` before sleeping on the
// doorbell, so a runner calling layer after layer never waits for a wake-up.
//
// The server trusts nothing in the mapping: each request is copied out of
// its slot before it is read (the client cannot change it under the
// reader), sizes are checked against the capacities read at Attach, and a
// client that writes garbage only gets errors back in its own slots.
//
// Lifetime: Stop() ends the thread (answering requests not yet taken with
// UNAVAILABLE) and returns; replies of calls still in the engine land later,
// into the mapping they keep alive.
#ifndef GDN_SERVER_CHANNEL_CHANNEL_SERVER_H_
#define GDN_SERVER_CHANNEL_CHANNEL_SERVER_H_

#include <grpcpp/support/byte_buffer.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/channel.h"
#include "proto/forward_wire.h"

namespace gdn {

// Writes a call's outcome into its slot: `response` (may be null when
// !status.ok()) or the status's message. Call exactly once, from any thread.
using ChannelReply = std::function<void(const absl::Status& status, grpc::ByteBuffer* response)>;

struct ChannelCall {
  // The server's own copy of the request bytes, valid only while the
  // handler runs (one buffer per channel, reused: no allocation and no
  // page faults per call). Read it before returning.
  wire::WireMessage request;
  absl::Duration timeout = absl::InfiniteDuration();
  uint64_t response_capacity = 0;  // a larger response is Internal: check first
  ChannelReply reply;
};

// Runs on the channel's thread; must not block for long (hand the call on).
using ChannelHandler = std::function<void(ChannelCall call)>;

class ChannelServer {
 public:
  struct Options {
    absl::Duration spin = absl::Milliseconds(1);  // polling after the last request
    absl::Duration sleep_slice = absl::Milliseconds(100);  // longest futex sleep
    absl::Duration client_check = absl::Seconds(1);  // is client_pid still alive?
  };

  // `mapping` keeps `base` (`bytes` long) mapped; the header is checked
  // (channel::ChannelView::Attach) before the thread starts.
  static absl::StatusOr<std::unique_ptr<ChannelServer>> Start(std::shared_ptr<void> mapping,
                                                              char* base, uint64_t bytes,
                                                              ChannelHandler handler,
                                                              Options options);
  ~ChannelServer();  // Stop()
  ChannelServer(const ChannelServer&) = delete;
  ChannelServer& operator=(const ChannelServer&) = delete;

  void Stop();
  // The thread has ended: stopped, or the client process exited.
  bool finished() const { return finished_.load(); }
  uint32_t slot_count() const { return view_.slot_count(); }

 private:
  ChannelServer(std::shared_ptr<void> mapping, channel::ChannelView view, ChannelHandler handler,
                Options options);
  void Serve();
  bool TakePosted();  // true when some slot had a request
  void Take(uint32_t slot);
  bool ClientGone() const;
  void AnswerPosted(const absl::Status& status);

  // Both held by every reply in flight.
  std::shared_ptr<void> mapping_;
  channel::ChannelView view_;
  ChannelHandler handler_;
  Options options_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  std::string request_buffer_;  // the serving thread's
  std::thread thread_;
};

}  // namespace gdn

#endif  // GDN_SERVER_CHANNEL_CHANNEL_SERVER_H_
