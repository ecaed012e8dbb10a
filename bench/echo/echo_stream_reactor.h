// ForwardStream on the echo: one request read, its answer written, the next
// read only after that, so answers go out in request order (like the
// server's). `Answer` fills the response of one request; per-message
// failures travel in the response (error_code), never end the stream.
// Deletes itself when the RPC is done.
#ifndef GDN_BENCH_ECHO_ECHO_STREAM_REACTOR_H_
#define GDN_BENCH_ECHO_ECHO_STREAM_REACTOR_H_

#include <grpcpp/support/server_callback.h>

#include <functional>
#include <utility>

namespace gdn::echo {

template <typename Request, typename Response>
class EchoStreamReactor final : public grpc::ServerBidiReactor<Request, Response> {
 public:
  using Answer = std::function<void(const Request&, Response*)>;

  explicit EchoStreamReactor(Answer answer) : answer_(std::move(answer)) {
    this->StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished sending (or went away)
      this->Finish(grpc::Status::OK);
      return;
    }
    answer_(request_, &response_);
    this->StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      this->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream write failed"));
      return;
    }
    this->StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  Answer answer_;
  Request request_;
  Response response_;
};

}  // namespace gdn::echo

#endif  // GDN_BENCH_ECHO_ECHO_STREAM_REACTOR_H_
