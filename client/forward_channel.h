// The client's end of a same-host Forward channel (proto/channel.h): a
// POSIX shm object created and laid out here, opened on the server with
// OpenChannel, closed (CloseChannel, unmapped, unlinked) when this goes.
// A Forward through it costs no socket round trip: the request bytes go
// into a slot, the server's thread (spinning while calls keep coming)
// picks them up, and the response comes back in the same slot.
//
// Same wire format and semantics as the Forward RPC (client/raw_forward.h):
// positions make calls exactly-once, errors come back with the gRPC code
// and message. Tensors may be inline (they must fit the slot) or, the
// point of it, references into registered regions with o in an output
// region, so that a decode call is a few hundred bytes each way.
//
// Threading: a slot carries one call at a time; give each calling thread a
// slot of its own (any number of threads, distinct slots).
#ifndef GDN_CLIENT_FORWARD_CHANNEL_H_
#define GDN_CLIENT_FORWARD_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/raw_forward.h"
#include "client/shared_memory_object.h"
#include "proto/channel.h"

namespace gdn::client {

struct ForwardChannelOptions {
  uint32_t slots = 1;
  uint64_t request_capacity = 64 << 10;   // bytes per slot
  uint64_t response_capacity = 1 << 20;  // bytes per slot (o inline needs room)
  // How long a caller polls for its response before sleeping on it.
  absl::Duration spin = absl::Milliseconds(2);
};

class ForwardChannel {
 public:
  // Creates the shm object "/gdn-<name>-<pid>-<n>", lays it out, and opens
  // it on the server behind `channel` under `name`.
  static absl::StatusOr<std::unique_ptr<ForwardChannel>> Open(
      std::shared_ptr<grpc::Channel> channel, const std::string& name,
      const ForwardChannelOptions& options);
  ~ForwardChannel();  // CloseChannel (best effort, 5 s), unmap, unlink
  ForwardChannel(const ForwardChannel&) = delete;
  ForwardChannel& operator=(const ForwardChannel&) = delete;

  // One Forward through `slot`: `request` is ForwardRequest bytes (as
  // wire::EncodeForwardRequest makes them). The errors of channel::Call
  // (DeadlineExceeded, Unavailable, InvalidArgument), else the server's.
  absl::StatusOr<RawForwardResponse> Forward(uint32_t slot, const grpc::ByteBuffer& request,
                                             absl::Duration timeout = absl::Seconds(120));

  uint32_t slot_count() const { return view_.slot_count(); }
  const std::string& name() const { return name_; }

 private:
  ForwardChannel() = default;

  std::shared_ptr<grpc::Channel> channel_;
  std::string name_;
  std::unique_ptr<SharedMemoryObject> shm_;  // closed on the server (destructor) before it goes
  channel::ChannelView view_;
  absl::Duration spin_;
  bool opened_ = false;  // on the server
};

}  // namespace gdn::client

#endif  // GDN_CLIENT_FORWARD_CHANNEL_H_
