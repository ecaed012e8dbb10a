// One ForwardStream per connection, and the parts of a split Forward spread
// over them at once: a large call (decode 256 x 1 is 4.1 MiB in, 2 MiB out;
// prefill 1 x 2048 32 MiB in, 16 MiB out) moves over several TCP
// connections in parallel instead of one.
//
// Why: gRPC handles one connection's bytes on one thread at a time (HTTP/2
// framing, the socket reads and writes), which caps a lone call near
// 2-3 GB/s on loopback. Four 64-session calls over four connections of the
// H200 host took 0.69-0.99 ms each at the same time, one 256-session call
// over one connection 2.9-3.0 ms (the proto echo, 2026-12-04,
// bench/results/2026-12-04-connections/). ForwardInParts
// (client/forward_in_parts.h) is the whole call over it, o and positions
// back.
//
// Each connection is a RawForwardStream on its own channel (channels made
// by MakeGdnChannel with distinct indices never share a connection), opened
// on first use. Forward sends each connection's parts pipelined (all sent,
// then all received) and drives the connections in parallel: connection 0
// on the calling thread, every other on a thread of its own that lives as
// long as this object. Like RawForwardStream, not thread-safe: one caller
// at a time.
//
// Order. Parts holding different sequences are independent. A part that
// continues a sequence cut by the split (its predecessor, PartPredecessors)
// may go on any connection: the server parks a piece whose position is
// ahead of its session's until the piece before it is applied.
//
// Failure. Each part has its own result. When a part fails, the pieces that
// follow it in its sequence would stay parked on the server for good (a
// stream has no deadline), so the streams holding them are cancelled: those
// pieces, cancelled while they waited, return Aborted (never applied); the
// other parts on those streams return Cancelled (applied or not) unless
// they were answered first. Parts on other streams run to their
// end. Unlike a call sent in parts one after another, which stops at the
// first failure, parts after a failed one may have been applied: their
// results (and the sessions' positions) say which. A stream that fails with
// UNAVAILABLE (a draining server) is opened again and its parts not yet
// answered are sent again, within the retry policy.
#ifndef GDN_CLIENT_PARALLEL_FORWARD_STREAMS_H_
#define GDN_CLIENT_PARALLEL_FORWARD_STREAMS_H_

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/forward_parts_split.h"
#include "client/raw_forward.h"
#include "client/raw_forward_stream.h"
#include "client/retry.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/byte_buffer.h"

namespace gdn::client {

// For each part, the part it continues (p - 1 when its first sequence is
// part p - 1's last, one sequence cut by the split), else -1.
std::vector<int> PartPredecessors(const std::vector<ForwardPartRefs>& parts);

// Each of `parts` parts' connection, the connections in turn (part p on
// p mod connections; connections < 1 counts as 1).
std::vector<int> ConnectionsInTurn(size_t parts, int connections);

// The failure to report of a Forward's results: the first part, in part
// order, that failed of itself (not Aborted behind a failed piece, not
// Cancelled with a stream that held one), else the first that failed;
// results.size() when every part succeeded.
size_t FirstOwnFailure(const std::vector<absl::StatusOr<RawForwardResponse>>& results);

class ParallelForwardStreams {
 public:
  // One connection per channel (at least one). `options`: the streams'
  // route and deadline (the deadline bounds each stream's whole life).
  // `poll`: how long a connection's thread, idle, polls for the next call
  // before it sleeps, and the caller for the threads' ends (a thread's
  // wake-up on a host whose idle cores sleep deeply costs tens of us, as
  // the server's engine_poll_us found); zero: sleep at once.
  ParallelForwardStreams(std::vector<std::shared_ptr<grpc::Channel>> channels,
                         RawCallOptions options, RetryPolicy retry, RetryObserver on_retry,
                         absl::Duration poll = absl::ZeroDuration());
  ~ParallelForwardStreams();  // stops the threads; unfinished streams are cancelled

  ParallelForwardStreams(const ParallelForwardStreams&) = delete;
  ParallelForwardStreams& operator=(const ParallelForwardStreams&) = delete;

  int connections() const { return static_cast<int>(connections_.size()); }

  // Sends parts[i] (encoded with request id ids[i]) over connection
  // connection_of[i] and waits for every answer: each part's response or
  // error, in the parts' order. predecessor[i] (PartPredecessors; empty:
  // none) is the part whose sequence part i continues: i - 1, or -1.
  // InvalidArgument for every part when the spans' sizes differ or a
  // connection or predecessor is out of range (nothing sent).
  std::vector<absl::StatusOr<RawForwardResponse>> Forward(
      absl::Span<const grpc::ByteBuffer> parts, absl::Span<const uint64_t> ids,
      absl::Span<const int> connection_of, absl::Span<const int> predecessor = {});

  // Ends every open stream (RawForwardStream::Finish): the first failure,
  // else OK. The streams open again on the next Forward.
  absl::Status Finish();

 private:
  struct Connection;
  struct Call;  // one Forward's shared state
  // One connection's share of a Forward: `mine` indexes the parts.
  void RunConnection(Connection& c, const std::vector<size_t>& mine, Call& call);
  // Part `failed` failed: cancels the streams that hold the pieces after it
  // in its sequence.
  void CancelFollowers(size_t failed, Call& call);
  void WorkerLoop(Connection* c);

  const RawCallOptions options_;
  const absl::Duration poll_;
  const RetryPolicy retry_;
  const RetryObserver on_retry_;
  std::vector<std::unique_ptr<Connection>> connections_;
};

}  // namespace gdn::client

#endif  // GDN_CLIENT_PARALLEL_FORWARD_STREAMS_H_
