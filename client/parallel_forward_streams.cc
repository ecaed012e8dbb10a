#include "client/parallel_forward_streams.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"

namespace gdn::client {

std::vector<int> AssignConnections(const std::vector<ForwardPartRefs>& parts, int connections) {
  connections = std::max(1, connections);
  std::vector<int> out(parts.size(), 0);
  int next = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const bool continues = p > 0 && !parts[p].original_sequence.empty() &&
                           !parts[p - 1].original_sequence.empty() &&
                           parts[p].original_sequence.front() ==
                               parts[p - 1].original_sequence.back();
    if (continues) {
      out[p] = out[p - 1];
    } else {
      out[p] = next;
      next = (next + 1) % connections;
    }
  }
  return out;
}

// A connection: its channel, its stream (null until first used, or after
// Finish), and for connections past the first the thread that drives it and
// the job handed to that thread.
struct ParallelForwardStreams::Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<RawForwardStream> stream;
  std::thread thread;
  absl::Mutex mu;
  std::function<void()> job ABSL_GUARDED_BY(mu);
  bool stop ABSL_GUARDED_BY(mu) = false;
};

ParallelForwardStreams::ParallelForwardStreams(std::vector<std::shared_ptr<grpc::Channel>> channels,
                                               RawCallOptions options, RetryPolicy retry,
                                               RetryObserver on_retry)
    : options_(std::move(options)), retry_(retry), on_retry_(std::move(on_retry)) {
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
    }
    c.thread.join();
  }
}

void ParallelForwardStreams::WorkerLoop(Connection* c) {
  for (;;) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&c->mu);
      c->mu.Await(absl::Condition(
          +[](Connection* c) ABSL_SHARED_LOCKS_REQUIRED(c->mu) { return c->stop || c->job; }, c));
      if (c->job == nullptr) return;  // stopped with nothing to do
      job = std::move(c->job);
      c->job = nullptr;
    }
    job();
  }
}

void ParallelForwardStreams::RunConnection(
    Connection& c, const std::vector<size_t>& mine, absl::Span<const grpc::ByteBuffer> parts,
    absl::Span<const uint64_t> ids, std::vector<absl::StatusOr<RawForwardResponse>>& results) {
  std::vector<bool> answered(mine.size(), false);
  std::vector<bool> got(mine.size(), false);  // a response or error came back
  const absl::Status status =
      CallWithRetry(retry_, on_retry_, "ForwardStream", [&](int attempt) -> absl::Status {
        // A stream that failed with UNAVAILABLE may be broken (its server
        // drained): what was not answered goes again on a new one.
        if (attempt > 1 || c.stream == nullptr) {
          c.stream.reset();
          absl::StatusOr<std::unique_ptr<RawForwardStream>> opened =
              RawForwardStream::Open(c.channel, options_);
          if (!opened.ok()) return opened.status();
          c.stream = *std::move(opened);
        }
        std::vector<size_t> sent;  // indices into `mine`
        absl::Status first_error;
        for (size_t j = 0; j < mine.size(); ++j) {
          if (answered[j]) continue;
          first_error = c.stream->Send(parts[mine[j]], ids[mine[j]]);
          if (!first_error.ok()) break;
          sent.push_back(j);
        }
        for (size_t j : sent) {
          absl::StatusOr<RawForwardResponse> received = c.stream->Receive();
          answered[j] = received.ok();
          got[j] = true;
          if (first_error.ok() && !received.ok()) first_error = received.status();
          results[mine[j]] = std::move(received);
        }
        return first_error;
      });
  // Parts never answered (the stream would not open, a send failed) take
  // the connection's final status.
  for (size_t j = 0; j < mine.size(); ++j) {
    if (!got[j]) {
      results[mine[j]] = status.ok() ? absl::InternalError("part not answered") : status;
    }
  }
}

std::vector<absl::StatusOr<RawForwardResponse>> ParallelForwardStreams::Forward(
    absl::Span<const grpc::ByteBuffer> parts, absl::Span<const uint64_t> ids,
    absl::Span<const int> connection_of) {
  const int n = connections();
  absl::Status bad;
  if (ids.size() != parts.size() || connection_of.size() != parts.size()) {
    bad = absl::InvalidArgumentError(absl::StrCat("Forward: ", parts.size(), " parts, ",
                                                  ids.size(), " ids, ", connection_of.size(),
                                                  " connections"));
  }
  for (size_t p = 0; bad.ok() && p < connection_of.size(); ++p) {
    if (connection_of[p] < 0 || connection_of[p] >= n) {
      bad = absl::InvalidArgumentError(absl::StrCat("Forward: part ", p, " names connection ",
                                                    connection_of[p], " of ", n));
    }
  }
  // Placeholder results: a part left unanswered keeps an error.
  std::vector<absl::StatusOr<RawForwardResponse>> results(
      parts.size(), bad.ok() ? absl::InternalError("part not answered") : bad);
  if (!bad.ok()) return results;
  std::vector<std::vector<size_t>> mine(n);
  for (size_t p = 0; p < parts.size(); ++p) mine[connection_of[p]].push_back(p);

  int helpers = 0;
  for (int i = 1; i < n; ++i) helpers += !mine[i].empty();
  absl::BlockingCounter done(helpers);
  for (int i = 1; i < n; ++i) {
    if (mine[i].empty()) continue;
    Connection& c = *connections_[i];
    absl::MutexLock lock(&c.mu);
    c.job = [&, i] {
      RunConnection(*connections_[i], mine[i], parts, ids, results);
      done.DecrementCount();
    };
  }
  if (!mine[0].empty()) RunConnection(*connections_[0], mine[0], parts, ids, results);
  done.Wait();
  return results;
}

absl::Status ParallelForwardStreams::Finish() {
  absl::Status first;
  for (std::unique_ptr<Connection>& c : connections_) {
    if (c->stream == nullptr) continue;
    absl::Status s = c->stream->Finish();
    c->stream.reset();
    if (first.ok()) first = s;
  }
  return first;
}

}  // namespace gdn::client
