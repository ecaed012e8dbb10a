// ForwardStream: many Forward requests over one bidirectional stream, on the
// raw byte path of Forward (read in place, packed, checked; responses sent
// from the engine's output blocks). Responses go out in request order; a
// failed request answers with error_code / error_message and the stream
// stays open. Requests are handed to the engine in the order they were read
// - the next read starts only after the previous request was submitted - so
// the engine applies a stream's requests in stream order (pipelined requests
// of one session park until their turn). At most kMaxOutstanding requests
// are in flight per stream; further reads wait.
//
// Lifetime: the reactor deletes itself in OnDone. It finishes only when
// reading has ended and every request handed to the engine has completed,
// so engine callbacks never see a deleted reactor.
#ifndef GDN_SERVER_RPC_FORWARD_STREAM_REACTOR_H_
#define GDN_SERVER_RPC_FORWARD_STREAM_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <mutex>

#include "absl/time/time.h"
#include "server/rpc/service_context.h"

namespace gdn {

class ForwardStreamReactor : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  static constexpr int kMaxOutstanding = 64;

  ForwardStreamReactor(const ServiceContext* service, grpc::CallbackServerContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  struct Slot {
    grpc::ByteBuffer response;
    bool complete = false;
  };

  // Reads, checks and packs the request just read into a new slot; returns
  // the call to submit (null when there is none: an invalid request).
  std::unique_ptr<ForwardCall> TakeRequest();
  void StartNextReadLocked();
  void MaybeWriteLocked();
  void MaybeFinishLocked();

  const ServiceContext* service_;
  grpc::CallbackServerContext* context_;
  // The caller, authenticated once when the stream opens (a stream that
  // cannot authenticate ends UNAUTHENTICATED before its first read).
  TenantScope scope_;

  std::mutex mu_;
  grpc::ByteBuffer reading_;  // the pending read's message
  // True from StartRead until OnReadDone has submitted what it read.
  bool read_pending_ = false;
  bool reads_done_ = false;
  bool writing_ = false;
  bool write_failed_ = false;
  bool finished_ = false;
  int in_engine_ = 0;  // requests handed to the engine, not yet completed
  std::deque<std::unique_ptr<Slot>> slots_;  // request order
};

}  // namespace gdn

#endif  // GDN_SERVER_RPC_FORWARD_STREAM_REACTOR_H_
