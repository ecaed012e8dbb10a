// ForwardStream with the requests and responses as bytes: the raw path of
// raw_forward.h (requests encoded in place by wire::EncodeForwardRequest,
// responses scanned where they arrived) over one bidirectional
// ForwardStream RPC, the cheapest way to make many sequential layer calls:
// one HTTP/2 stream for all of them instead of a new stream, headers and
// call set-up per call.
//
// The server answers in request order, and a failed request does not end
// the stream (its response carries error_code, returned by Receive as that
// code and message, as GdnClient's ForwardStream does). The stream is driven
// on the calling thread through a completion queue of its own (like a
// generated blocking stub: no thread hop), so it is NOT thread-safe: one
// thread at a time (a model runner's layer loop, a gdn-bench lane). Several
// requests may be sent before their responses are received (pipelining).
//
// The route header and the deadline of RawCallOptions are the stream's (the
// deadline bounds the whole stream, as GdnClient::OpenForwardStream's);
// retries are the caller's: after UNAVAILABLE open a new stream and resend
// what was not answered.
#ifndef GDN_CLIENT_RAW_FORWARD_STREAM_H_
#define GDN_CLIENT_RAW_FORWARD_STREAM_H_

#include <cstdint>
#include <deque>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/raw_forward.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace gdn::client {

inline constexpr char kForwardStreamMethod[] = "/gdn.v1.GdnService/ForwardStream";

class RawForwardStream {
 public:
  // Starts the RPC (no round trip: the server sees it with the first
  // message). UNAVAILABLE when the channel cannot start it.
  static absl::StatusOr<std::unique_ptr<RawForwardStream>> Open(
      const std::shared_ptr<grpc::Channel>& channel, const RawCallOptions& options);
  ~RawForwardStream();  // cancels and drains a stream not finished

  RawForwardStream(const RawForwardStream&) = delete;
  RawForwardStream& operator=(const RawForwardStream&) = delete;

  // Sends one request; `request_id` is the id encoded in it (0: none, the
  // response's id is then not checked). The request is not consumed (gRPC
  // takes references to its slices). A stream that has ended returns its
  // final status (UNAVAILABLE when that was OK).
  absl::Status Send(const grpc::ByteBuffer& request, uint64_t request_id);
  // The next response, in request order: o is a span of the received
  // slices. Its error_code as a Status when the request failed; Internal
  // when the response does not parse, answers no request or answers another
  // id; the stream's final status when it ended.
  absl::StatusOr<RawForwardResponse> Receive();
  // Ends the sending side, drops responses not yet received and returns
  // the RPC's final status (also after a failed Send / Receive).
  // FailedPrecondition when called twice.
  absl::Status Finish();

  // Requests sent and not yet received.
  size_t in_flight() const { return in_flight_.size(); }
  // Whether the RPC is over (a failed operation or Finish): every later
  // Send / Receive returns its final status.
  bool ended() const { return ended_; }

  // Cancels the RPC (grpc::ClientContext::TryCancel): the operation the
  // owning thread is waiting on, and every later one, fails with the final
  // status CANCELLED. The one method safe to call from another thread.
  void Cancel() { context_.TryCancel(); }

 private:
  RawForwardStream(const std::shared_ptr<grpc::Channel>& channel, const RawCallOptions& options);
  // Waits for the one outstanding operation; its ok flag.
  bool Await();
  // Closes the stream after a failed operation: its final status, never OK.
  absl::Status Ended();

  grpc::GenericStub stub_;
  grpc::CompletionQueue queue_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  std::deque<uint64_t> in_flight_;  // ids sent, not received
  bool ended_ = false;    // a read or write failed: the RPC is over
  bool finished_ = false;  // its final status was taken
  bool finish_called_ = false;
  absl::Status final_status_;
};

}  // namespace gdn::client

#endif  // GDN_CLIENT_RAW_FORWARD_STREAM_H_
