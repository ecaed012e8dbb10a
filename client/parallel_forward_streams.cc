#include "client/parallel_forward_streams.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "proto/channel.h"

namespace gdn::client {

std::vector<int> PartPredecessors(const std::vector<ForwardPartRefs>& parts) {
  std::vector<int> out(parts.size(), -1);
  for (size_t p = 1; p < parts.size(); ++p) {
    const std::vector<int>& before = parts[p - 1].original_sequence;
    const std::vector<int>& here = parts[p].original_sequence;
    if (!before.empty() && !here.empty() && here.front() == before.back()) {
      out[p] = static_cast<int>(p - 1);
    }
  }
  return out;
}

std::vector<int> ConnectionsInTurn(size_t parts, int connections) {
  connections = std::max(1, connections);
  std::vector<int> out(parts);
  for (size_t p = 0; p < parts; ++p) out[p] = static_cast<int>(p % connections);
  return out;
}

size_t FirstOwnFailure(const std::vector<absl::StatusOr<RawForwardResponse>>& results) {
  size_t first = results.size();
  for (size_t p = 0; p < results.size(); ++p) {
    if (results[p].ok()) continue;
    const absl::StatusCode code = results[p].status().code();
    if (code != absl::StatusCode::kAborted && code != absl::StatusCode::kCancelled) return p;
    if (first == results.size()) first = p;
  }
  return first;
}

namespace {

// Polls `ready` for at most `limit` (nothing when limit is zero).
template <typename Ready>
void PollFor(const Ready& ready, absl::Duration limit) {
  if (limit <= absl::ZeroDuration()) return;
  const absl::Time until = absl::Now() + limit;
  while (!ready()) {
    for (int i = 0; i < 64; ++i) channel::CpuRelax();
    if (absl::Now() >= until) return;
  }
}

}  // namespace

// A connection: its channel, its stream (null until first used, or after
// Finish), and for connections past the first the thread that drives it and
// the job handed to that thread. `stream_mu` guards the stream pointer
// against another thread's cancellation (CancelFollowers) while the owner
// replaces it; the owner reads it without the lock.
struct ParallelForwardStreams::Connection {
  std::shared_ptr<grpc::Channel> channel;
  absl::Mutex stream_mu;
  std::unique_ptr<RawForwardStream> stream;
  bool cancelled ABSL_GUARDED_BY(stream_mu) = false;  // in this Forward
  std::thread thread;
  absl::Mutex mu;
  std::function<void()> job ABSL_GUARDED_BY(mu);
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::atomic<bool> posted{false};  // a job or stop: what the idle thread polls
};

struct ParallelForwardStreams::Call {
  absl::Span<const grpc::ByteBuffer> parts;
  absl::Span<const uint64_t> ids;
  absl::Span<const int> connection_of;
  absl::Span<const int> predecessor;  // empty: none
  std::vector<absl::StatusOr<RawForwardResponse>> results;
  absl::Mutex mu;
  std::vector<int> failed_before ABSL_GUARDED_BY(mu);  // -1, or the failed piece it follows
};

ParallelForwardStreams::ParallelForwardStreams(std::vector<std::shared_ptr<grpc::Channel>> channels,
                                               RawCallOptions options, RetryPolicy retry,
                                               RetryObserver on_retry, absl::Duration poll)
    : options_(std::move(options)),
      poll_(poll),
      retry_(retry),
      on_retry_(std::move(on_retry)) {
  for (std::shared_ptr<grpc::Channel>& channel : channels) {
    auto c = std::make_unique<Connection>();
    c->channel = std::move(channel);
    connections_.push_back(std::move(c));
  }
  for (size_t i = 1; i < connections_.size(); ++i) {
    Connection* c = connections_[i].get();
    c->thread = std::thread([this, c] { WorkerLoop(c); });
  }
}

ParallelForwardStreams::~ParallelForwardStreams() {
  for (size_t i = 1; i < connections_.size(); ++i) {
    Connection& c = *connections_[i];
    {
      absl::MutexLock lock(&c.mu);
      c.stop = true;
      c.posted.store(true, std::memory_order_release);
    }
    c.thread.join();
  }
}

void ParallelForwardStreams::WorkerLoop(Connection* c) {
  for (;;) {
    PollFor([c] { return c->posted.load(std::memory_order_acquire); }, poll_);
    std::function<void()> job;
    {
      absl::MutexLock lock(&c->mu);
      c->mu.Await(absl::Condition(
          +[](Connection* c) ABSL_SHARED_LOCKS_REQUIRED(c->mu) { return c->stop || c->job; }, c));
      if (c->job == nullptr) return;  // stopped with nothing to do
      job = std::move(c->job);
      c->job = nullptr;
      c->posted.store(false, std::memory_order_relaxed);
    }
    job();
  }
}

void ParallelForwardStreams::CancelFollowers(size_t failed, Call& call) {
  if (call.predecessor.empty()) return;
  std::vector<int> cancel;
  {
    absl::MutexLock lock(&call.mu);
    for (size_t r = failed + 1;
         r < call.parts.size() && call.predecessor[r] == static_cast<int>(r - 1); ++r) {
      if (call.failed_before[r] >= 0) break;  // an earlier failure cancelled these
      call.failed_before[r] = static_cast<int>(failed);
      cancel.push_back(call.connection_of[r]);
    }
  }
  std::sort(cancel.begin(), cancel.end());
  cancel.erase(std::unique(cancel.begin(), cancel.end()), cancel.end());
  for (int i : cancel) {
    Connection& c = *connections_[i];
    absl::MutexLock lock(&c.stream_mu);
    c.cancelled = true;
    if (c.stream != nullptr) c.stream->Cancel();
  }
}

void ParallelForwardStreams::RunConnection(Connection& c, const std::vector<size_t>& mine,
                                           Call& call) {
  std::vector<bool> answered(mine.size(), false);
  std::vector<bool> got(mine.size(), false);  // a response or error came back
  const absl::Status status =
      CallWithRetry(retry_, on_retry_, "ForwardStream", [&](int attempt) -> absl::Status {
        // A stream that failed with UNAVAILABLE may be broken (its server
        // drained): what was not answered goes again on a new one. One that
        // ended in an earlier Forward (cancelled) is replaced too.
        if (attempt > 1 || c.stream == nullptr || c.stream->ended()) {
          absl::StatusOr<std::unique_ptr<RawForwardStream>> opened =
              RawForwardStream::Open(c.channel, options_);
          absl::MutexLock lock(&c.stream_mu);
          if (c.cancelled) return absl::CancelledError("an earlier piece failed");
          c.stream.reset();
          if (!opened.ok()) return opened.status();
          c.stream = *std::move(opened);
        }
        std::vector<size_t> sent;  // indices into `mine`
        absl::Status first_error;
        for (size_t j = 0; j < mine.size(); ++j) {
          if (answered[j]) continue;
          first_error = c.stream->Send(call.parts[mine[j]], call.ids[mine[j]]);
          if (!first_error.ok()) break;
          sent.push_back(j);
        }
        for (size_t j : sent) {
          absl::StatusOr<RawForwardResponse> received = c.stream->Receive();
          answered[j] = received.ok();
          got[j] = true;
          if (!received.ok()) {
            if (first_error.ok()) first_error = received.status();
            // A retryable failure may yet be applied on a new stream: its
            // followers wait for that (below, once the tries are over).
            if (!IsRetryable(received.status())) CancelFollowers(mine[j], call);
          }
          call.results[mine[j]] = std::move(received);
        }
        return first_error;
      });
  // Parts never answered (the stream would not open, a send failed) take
  // the connection's final status; the followers of every part that did not
  // succeed are cancelled.
  for (size_t j = 0; j < mine.size(); ++j) {
    if (!got[j]) {
      call.results[mine[j]] = status.ok() ? absl::InternalError("part not answered") : status;
    }
    if (!answered[j]) CancelFollowers(mine[j], call);
  }
}

std::vector<absl::StatusOr<RawForwardResponse>> ParallelForwardStreams::Forward(
    absl::Span<const grpc::ByteBuffer> parts, absl::Span<const uint64_t> ids,
    absl::Span<const int> connection_of, absl::Span<const int> predecessor) {
  const int n = connections();
  absl::Status bad;
  if (ids.size() != parts.size() || connection_of.size() != parts.size() ||
      (!predecessor.empty() && predecessor.size() != parts.size())) {
    bad = absl::InvalidArgumentError(
        absl::StrCat("Forward: ", parts.size(), " parts, ", ids.size(), " ids, ",
                     connection_of.size(), " connections, ", predecessor.size(), " predecessors"));
  }
  for (size_t p = 0; bad.ok() && p < parts.size(); ++p) {
    if (connection_of[p] < 0 || connection_of[p] >= n) {
      bad = absl::InvalidArgumentError(absl::StrCat("Forward: part ", p, " names connection ",
                                                    connection_of[p], " of ", n));
    } else if (!predecessor.empty() && predecessor[p] != -1 &&
               predecessor[p] != static_cast<int>(p) - 1) {
      bad = absl::InvalidArgumentError(absl::StrCat("Forward: part ", p, " names predecessor ",
                                                    predecessor[p]));
    }
  }
  Call call;
  call.parts = parts;
  call.ids = ids;
  call.connection_of = connection_of;
  call.predecessor = predecessor;
  // Placeholder results: a part left unanswered keeps an error.
  call.results.assign(parts.size(), bad.ok() ? absl::InternalError("part not answered") : bad);
  if (!bad.ok()) return std::move(call.results);
  {
    absl::MutexLock lock(&call.mu);
    call.failed_before.assign(parts.size(), -1);
  }
  for (std::unique_ptr<Connection>& c : connections_) {
    absl::MutexLock lock(&c->stream_mu);
    c->cancelled = false;
  }
  std::vector<std::vector<size_t>> mine(n);
  for (size_t p = 0; p < parts.size(); ++p) mine[connection_of[p]].push_back(p);

  int helpers = 0;
  for (int i = 1; i < n; ++i) helpers += !mine[i].empty();
  absl::BlockingCounter done(helpers);
  std::atomic<int> running{helpers};  // polled before done.Wait() sleeps
  for (int i = 1; i < n; ++i) {
    if (mine[i].empty()) continue;
    Connection& c = *connections_[i];
    absl::MutexLock lock(&c.mu);
    c.job = [&, i] {
      RunConnection(*connections_[i], mine[i], call);
      running.fetch_sub(1, std::memory_order_release);
      done.DecrementCount();
    };
    c.posted.store(true, std::memory_order_release);
  }
  if (!mine[0].empty()) RunConnection(*connections_[0], mine[0], call);
  PollFor([&running] { return running.load(std::memory_order_acquire) == 0; }, poll_);
  done.Wait();
  // Pieces after a failed one that were cancelled were never applied (they
  // waited for it); any other answer (one of their own, before the
  // cancellation) stands.
  absl::MutexLock lock(&call.mu);
  for (size_t p = 0; p < parts.size(); ++p) {
    const int failed = call.failed_before[p];
    if (failed >= 0 && absl::IsCancelled(call.results[p].status())) {
      call.results[p] = absl::AbortedError(absl::StrCat(
          "not applied: part ", failed + 1, ", an earlier piece of its sequence, failed"));
    }
  }
  return std::move(call.results);
}

absl::Status ParallelForwardStreams::Finish() {
  absl::Status first;
  for (std::unique_ptr<Connection>& c : connections_) {
    if (c->stream == nullptr) continue;
    absl::Status s = c->stream->Finish();
    absl::MutexLock lock(&c->stream_mu);
    c->stream.reset();
    if (first.ok()) first = s;
  }
  return first;
}

}  // namespace gdn::client
