// One ForwardStream per connection, and the parts of a split Forward spread
// over them at once: a large call (decode 256 x 1 is 4.1 MiB in, 2 MiB out)
// moves over several TCP connections in parallel instead of one.
//
// Why: gRPC handles one connection's bytes on one thread at a time (HTTP/2
// framing, the socket reads and writes), which caps a lone call near
// 2-3 GB/s on loopback. Four 64-session calls over four connections of the
// H200 host took 0.69-0.99 ms each at the same time, one 256-session call
// over one connection 2.9-3.0 ms (the proto echo, 2026-12-04,
// bench/results/2026-12-04-connections/).
//
// Each connection is a RawForwardStream on its own channel (channels made
// by MakeGdnChannel with distinct indices never share a connection), opened
// on first use. Forward sends each connection's parts pipelined (all sent,
// then all received) and drives the connections in parallel: connection 0
// on the calling thread, every other on a thread of its own that lives as
// long as this object. Like RawForwardStream, not thread-safe: one caller
// at a time.
//
// Order and failure. Parts on one connection are applied in the order
// given; parts on different connections in any order. So a part that
// continues a sequence cut by the split must go on the connection of the
// part before it (AssignConnections does that). Each part has its own
// result: when one fails, parts on other connections may have been applied
// (their results say which), unlike a call sent in parts one after another,
// which stops at the first failure. A stream that fails with UNAVAILABLE (a
// draining server) is opened again and its parts not yet answered are sent
// again, within the retry policy, as gdn-bench's single stream did.
#ifndef GDN_CLIENT_PARALLEL_FORWARD_STREAMS_H_
#define GDN_CLIENT_PARALLEL_FORWARD_STREAMS_H_

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/forward_parts_split.h"
#include "client/raw_forward.h"
#include "client/raw_forward_stream.h"
#include "client/retry.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/byte_buffer.h"

namespace gdn::client {

// The connection of each part (0 .. connections - 1): a part whose first
// sequence is the previous part's last (one sequence cut by the split)
// stays on the previous part's connection; the others take the connections
// in turn. connections < 1 counts as 1.
std::vector<int> AssignConnections(const std::vector<ForwardPartRefs>& parts, int connections);

class ParallelForwardStreams {
 public:
  // One connection per channel (at least one). `options`: the streams'
  // route and deadline (the deadline bounds each stream's whole life).
  ParallelForwardStreams(std::vector<std::shared_ptr<grpc::Channel>> channels,
                         RawCallOptions options, RetryPolicy retry, RetryObserver on_retry);
  ~ParallelForwardStreams();  // stops the threads; unfinished streams are cancelled

  ParallelForwardStreams(const ParallelForwardStreams&) = delete;
  ParallelForwardStreams& operator=(const ParallelForwardStreams&) = delete;

  int connections() const { return static_cast<int>(connections_.size()); }

  // Sends parts[i] (encoded with request id ids[i]) over connection
  // connection_of[i] and waits for every answer: each part's response or
  // error, in the parts' order. InvalidArgument for every part when the
  // spans' sizes differ or a connection is out of range (nothing sent).
  std::vector<absl::StatusOr<RawForwardResponse>> Forward(
      absl::Span<const grpc::ByteBuffer> parts, absl::Span<const uint64_t> ids,
      absl::Span<const int> connection_of);

  // Ends every open stream (RawForwardStream::Finish): the first failure,
  // else OK. The streams open again on the next Forward.
  absl::Status Finish();

 private:
  struct Connection;
  // One connection's share of a Forward: `mine` indexes the parts.
  void RunConnection(Connection& c, const std::vector<size_t>& mine,
                     absl::Span<const grpc::ByteBuffer> parts, absl::Span<const uint64_t> ids,
                     std::vector<absl::StatusOr<RawForwardResponse>>& results);
  void WorkerLoop(Connection* c);

  const RawCallOptions options_;
  const RetryPolicy retry_;
  const RetryObserver on_retry_;
  std::vector<std::unique_ptr<Connection>> connections_;
};

}  // namespace gdn::client

#endif  // GDN_CLIENT_PARALLEL_FORWARD_STREAMS_H_
