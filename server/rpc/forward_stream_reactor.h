// ForwardStream: many Forward requests over one bidirectional stream.
// Responses go out in request order; a failed request answers with
// error_code / error_message and the stream stays open. Requests are
// validated on arrival and handed to the engine at once (so pipelined
// requests of one session park until their turn); at most
// kMaxOutstanding are in flight per stream, further reads wait.
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
#include "gdn/v1/gdn.grpc.pb.h"
#include "server/rpc/service_context.h"

namespace gdn {

class ForwardStreamReactor
    : public grpc::ServerBidiReactor<gdn::v1::ForwardRequest,
                                     gdn::v1::ForwardResponse> {
 public:
  static constexpr int kMaxOutstanding = 64;

  ForwardStreamReactor(const ServiceContext* service,
                       grpc::CallbackServerContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  struct Slot {
    gdn::v1::ForwardResponse response;
    bool complete = false;
  };

  // Validates the request just read; returns the call to submit (null when
  // there is none: end of stream or an invalid request).
  std::unique_ptr<ForwardCall> ValidateAndQueue(bool ok);
  void StartNextReadLocked();
  void CompleteSlot(Slot* slot, const absl::Status& status);
  void MaybeWriteLocked();
  void MaybeFinishLocked();

  const ServiceContext* service_;
  grpc::CallbackServerContext* context_;

  std::mutex mu_;
  std::unique_ptr<gdn::v1::ForwardRequest> reading_;  // the pending read
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
