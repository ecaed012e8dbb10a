// CallbackRunner: runs posted closures one at a time, in posting order, on a
// thread of its own.
//
// Why: the engine thread finishes a Forward call by running its `done`
// callback, which fills the response (o: up to tens of MB), serializes it and
// hands it to gRPC's write path. Profiled on a --diagnostic_no_compute server
// (2026-11-29, 64 sessions, 32 per call, 36 layers) that was more than half of
// the engine thread's time: time in which it could not plan or stage the next
// batch. The engine posts the callbacks here instead; FIFO keeps the order in
// which calls finished.
//
// Threading: Post from any thread. Stop (also run by the destructor) runs
// everything already posted, then joins; a Post after Stop runs the closure
// on the caller's thread.
#ifndef GDN_SERVER_ENGINE_CALLBACK_RUNNER_H_
#define GDN_SERVER_ENGINE_CALLBACK_RUNNER_H_

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/functional/any_invocable.h"

namespace gdn {

class CallbackRunner {
 public:
  CallbackRunner();
  ~CallbackRunner();  // Stop()

  CallbackRunner(const CallbackRunner&) = delete;
  CallbackRunner& operator=(const CallbackRunner&) = delete;

  void Post(absl::AnyInvocable<void() &&> closure);
  void Stop();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<absl::AnyInvocable<void() &&>> queue_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace gdn

#endif  // GDN_SERVER_ENGINE_CALLBACK_RUNNER_H_
