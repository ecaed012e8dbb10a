// ForwardStream on the echo: requests are answered as they are read and the
// answers written in request order (like the server's); the next read
// starts as soon as a request is answered, not after its answer is written,
// so a client may pipeline requests (send several before reading any
// answer) as it may against the server, which reads ahead the same way. At
// most kMaxOutstanding answers wait to be written; further reads wait.
// `Answer` fills the response of one request; per-message failures travel
// in the response (error_code), never end the stream. Deletes itself when
// the RPC is done.
//
// Why read ahead: with a read only after the previous answer was written,
// a client that sends several multi-MiB requests before reading stalls
// both ends (its write waits for the echo to read, the echo's write for the
// client to read).
#ifndef GDN_BENCH_ECHO_ECHO_STREAM_REACTOR_H_
#define GDN_BENCH_ECHO_ECHO_STREAM_REACTOR_H_

#include <grpcpp/support/server_callback.h>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

namespace gdn::echo {

template <typename Request, typename Response>
class EchoStreamReactor final : public grpc::ServerBidiReactor<Request, Response> {
 public:
  using Answer = std::function<void(const Request&, Response*)>;
  static constexpr size_t kMaxOutstanding = 64;

  explicit EchoStreamReactor(Answer answer) : answer_(std::move(answer)) {
    this->StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    std::unique_ptr<Response> response;
    if (ok) {
      response = std::make_unique<Response>();
      answer_(request_, response.get());
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!ok) {  // the client finished sending (or went away)
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    if (finished_) return;  // a write failed: the RPC is ending
    answers_.push_back(std::move(response));
    if (!writing_) {
      writing_ = true;
      this->StartWrite(answers_.front().get());
    }
    if (answers_.size() < kMaxOutstanding) {
      this->StartRead(&request_);
    } else {
      read_waiting_ = true;
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    answers_.pop_front();
    if (!ok) {
      if (!finished_) {
        finished_ = true;
        this->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream write failed"));
      }
      return;
    }
    if (!answers_.empty() && !finished_) {
      writing_ = true;
      this->StartWrite(answers_.front().get());
    }
    if (read_waiting_) {
      read_waiting_ = false;
      this->StartRead(&request_);
    }
    MaybeFinishLocked();
  }

  void OnDone() override { delete this; }

 private:
  // Ends the RPC once the client is done sending and every answer is out.
  void MaybeFinishLocked() {
    if (reads_done_ && !writing_ && answers_.empty() && !finished_) {
      finished_ = true;
      this->Finish(grpc::Status::OK);
    }
  }

  Answer answer_;
  Request request_;  // the pending read's message

  std::mutex mu_;
  std::deque<std::unique_ptr<Response>> answers_;  // request order; front is being written
  bool writing_ = false;
  bool read_waiting_ = false;  // kMaxOutstanding answers wait: no read started
  bool reads_done_ = false;
  bool finished_ = false;
};

}  // namespace gdn::echo

#endif  // GDN_BENCH_ECHO_ECHO_STREAM_REACTOR_H_
