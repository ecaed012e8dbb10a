// ParallelForwardStreams (client/parallel_forward_streams.h) against the
// fake gdn.v1 service: parts spread over connections that are distinct TCP
// connections, every part answered in the parts' order, a part's error
// returned as its own result with the streams still usable, the streams
// holding the pieces after a failed one cancelled (no hang) and those pieces
// Aborted, bad spans refused before anything is sent, streams opened again
// after Finish, after a cancellation and after a draining server's
// UNAVAILABLE; ConnectionsInTurn, PartPredecessors and FirstOwnFailure.
#include "client/parallel_forward_streams.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/client/fake_forward_service.h"

namespace gdn::client {
namespace {

ForwardPartRefs PartOf(std::vector<int> original_sequences) {
  ForwardPartRefs p;
  p.original_sequence = std::move(original_sequences);
  return p;
}

TEST(ConnectionsInTurnTest, PartsTakeTheConnectionsInTurn) {
  EXPECT_EQ(ConnectionsInTurn(5, 2), (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(ConnectionsInTurn(3, 0), (std::vector<int>{0, 0, 0}));
  EXPECT_TRUE(ConnectionsInTurn(0, 4).empty());
}

TEST(PartPredecessorsTest, APartContinuingACutSequenceNamesThePartBefore) {
  // Sequence 1 cut between parts 0 and 1, sequence 2 over parts 1-3.
  EXPECT_EQ(PartPredecessors({PartOf({0, 1}), PartOf({1, 2}), PartOf({2}), PartOf({2}),
                              PartOf({3}), PartOf({4, 5})}),
            (std::vector<int>{-1, 0, 1, 2, -1, -1}));
  EXPECT_EQ(PartPredecessors({PartOf({0}), PartOf({1})}), (std::vector<int>{-1, -1}));
  EXPECT_TRUE(PartPredecessors({}).empty());
}

TEST(FirstOwnFailureTest, APartThatFailedOfItselfBeforeItsConsequences) {
  using Results = std::vector<absl::StatusOr<RawForwardResponse>>;
  Results r(4, RawForwardResponse{});
  EXPECT_EQ(FirstOwnFailure(r), 4u);  // all succeeded
  r[1] = absl::CancelledError("with its stream");
  r[2] = absl::NotFoundError("its own");
  r[3] = absl::AbortedError("behind part 3");
  EXPECT_EQ(FirstOwnFailure(r), 2u);
  r[2] = absl::CancelledError("with its stream");
  EXPECT_EQ(FirstOwnFailure(r), 1u);  // only consequences: the first
}

class ParallelForwardStreamsTest : public FakeForwardServiceTest {
 protected:
  // `n` connections: the client's channel, then channels of their own;
  // the fixture's retry policy (none) unless `retry` is given.
  std::unique_ptr<ParallelForwardStreams> Make(int n, const RetryPolicy* retry = nullptr,
                                               absl::Duration poll = absl::ZeroDuration()) {
    std::vector<std::shared_ptr<grpc::Channel>> channels{client_->channel()};
    for (int i = 1; i < n; ++i) channels.push_back(MakeGdnChannel(address_, options_, i));
    return std::make_unique<ParallelForwardStreams>(
        channels, Options(), retry != nullptr ? *retry : options_.retry, nullptr, poll);
  }
  // Parts with request ids 1..n.
  static void Parts(int n, std::vector<grpc::ByteBuffer>* parts, std::vector<uint64_t>* ids) {
    parts->clear();
    ids->clear();
    for (int i = 1; i <= n; ++i) {
      parts->push_back(RequestBytes(i));
      ids->push_back(i);
    }
  }
};

TEST_F(ParallelForwardStreamsTest, PartsGoOverDistinctConnectionsAndAllAreAnswered) {
  std::unique_ptr<ParallelForwardStreams> streams = Make(3);
  EXPECT_EQ(streams->connections(), 3);
  std::vector<grpc::ByteBuffer> parts;
  std::vector<uint64_t> ids;
  Parts(7, &parts, &ids);
  const std::vector<int> connection_of{0, 1, 2, 0, 1, 2, 0};
  for (int call = 0; call < 3; ++call) {  // the streams stay open between calls
    std::vector<absl::StatusOr<RawForwardResponse>> r =
        streams->Forward(parts, ids, connection_of);
    ASSERT_EQ(r.size(), parts.size());
    for (size_t p = 0; p < r.size(); ++p) {
      ASSERT_TRUE(r[p].ok()) << p << ": " << r[p].status();
      EXPECT_EQ(r[p]->fields.request_id, ids[p]);
      EXPECT_EQ(r[p]->fields.positions, (std::vector<int64_t>{42}));
    }
  }
  EXPECT_TRUE(streams->Finish().ok());
  const std::vector<std::string> peers = service_.stream_peers();
  EXPECT_EQ(peers.size(), 3u);  // one stream per connection, opened once
  EXPECT_EQ(std::set<std::string>(peers.begin(), peers.end()).size(), 3u) << peers[0];
  EXPECT_EQ(service_.routes(), std::vector<std::string>(3, "tenant7"));
}

// Threads that poll for their next call (and a caller that polls for their
// ends) answer as sleeping ones do, across calls with gaps longer and
// shorter than the poll; the object goes without waiting for a poll to end.
TEST_F(ParallelForwardStreamsTest, PollingThreadsAnswerEveryCall) {
  std::unique_ptr<ParallelForwardStreams> streams = Make(3, nullptr, absl::Milliseconds(2));
  std::vector<grpc::ByteBuffer> parts;
  std::vector<uint64_t> ids;
  Parts(6, &parts, &ids);
  for (int call = 0; call < 6; ++call) {
    const std::vector<absl::StatusOr<RawForwardResponse>> r =
        streams->Forward(parts, ids, {0, 1, 2, 0, 1, 2});
    for (size_t p = 0; p < r.size(); ++p) {
      ASSERT_TRUE(r[p].ok()) << call << " " << p << ": " << r[p].status();
      EXPECT_EQ(r[p]->fields.request_id, ids[p]);
    }
    if (call % 2 == 1) absl::SleepFor(absl::Milliseconds(5));  // past the poll: asleep
  }
  EXPECT_TRUE(streams->Finish().ok());
  const absl::Time before = absl::Now();
  streams.reset();
  EXPECT_LT(absl::Now() - before, absl::Seconds(1));
}

TEST_F(ParallelForwardStreamsTest, APartsErrorIsItsOwnAndTheStreamsStayUsable) {
  std::unique_ptr<ParallelForwardStreams> streams = Make(2);
  std::vector<grpc::ByteBuffer> parts;
  std::vector<uint64_t> ids;
  Parts(4, &parts, &ids);
  service_.Set({grpc::StatusCode::OK, static_cast<int32_t>(absl::StatusCode::kNotFound),
                "session 'tenant7/chat-3' not found"});
  std::vector<absl::StatusOr<RawForwardResponse>> r = streams->Forward(parts, ids, {0, 1, 0, 1});
  for (const auto& part : r) {
    EXPECT_TRUE(absl::IsNotFound(part.status())) << part.status();
    EXPECT_EQ(part.status().message(), "session 'tenant7/chat-3' not found");
  }
  service_.Set({});
  r = streams->Forward(parts, ids, {1, 1, 0, 0});
  for (const auto& part : r) EXPECT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(service_.stream_peers().size(), 2u);  // the same two streams
  EXPECT_TRUE(streams->Finish().ok());
}

// Part 1 fails; parts 2 and 3 are the next pieces of its sequence, parked
// on the server (never answered) on connections 2 and 0: those streams are
// cancelled, the pieces Aborted; part 0 (connection 0, answered before the
// cancellation or cancelled with it) and part 4 (connection 1, after the
// failed one on its stream) keep results of their own. The next Forward
// opens new streams.
TEST_F(ParallelForwardStreamsTest, PiecesAfterAFailedOneAreCancelledNotLeftWaiting) {
  std::unique_ptr<ParallelForwardStreams> streams = Make(3);
  Behaviour b;
  b.fail_session = "tenant7/fails";
  b.park_session = "tenant7/parked";
  service_.Set(b);
  const std::vector<grpc::ByteBuffer> parts{
      RequestBytes(1), RequestBytes(2, "tenant7/fails"), RequestBytes(3, "tenant7/parked"),
      RequestBytes(4, "tenant7/parked"), RequestBytes(5)};
  const std::vector<uint64_t> ids{1, 2, 3, 4, 5};
  const std::vector<int> connection_of{0, 1, 2, 0, 1};
  const std::vector<int> predecessor{-1, -1, 1, 2, -1};
  const std::vector<absl::StatusOr<RawForwardResponse>> r =
      streams->Forward(parts, ids, connection_of, predecessor);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_TRUE(absl::IsNotFound(r[1].status())) << r[1].status();
  for (int p : {2, 3}) {
    EXPECT_TRUE(absl::IsAborted(r[p].status())) << p << ": " << r[p].status();
    EXPECT_NE(r[p].status().message().find("part 2"), absl::string_view::npos) << r[p].status();
  }
  EXPECT_TRUE(r[0].ok() || absl::IsCancelled(r[0].status())) << r[0].status();
  EXPECT_TRUE(r[4].ok()) << r[4].status();  // its stream was not cancelled

  service_.Set({});
  const std::vector<absl::StatusOr<RawForwardResponse>> again =
      streams->Forward(parts, ids, connection_of, predecessor);
  for (size_t p = 0; p < again.size(); ++p) EXPECT_TRUE(again[p].ok()) << p << again[p].status();
  EXPECT_TRUE(streams->Finish().ok());
}

TEST_F(ParallelForwardStreamsTest, BadSpansAreRefusedAndNothingIsSent) {
  std::unique_ptr<ParallelForwardStreams> streams = Make(2);
  std::vector<grpc::ByteBuffer> parts;
  std::vector<uint64_t> ids;
  Parts(2, &parts, &ids);
  for (const std::vector<int>& bad : {std::vector<int>{0}, std::vector<int>{0, 2},
                                      std::vector<int>{-1, 0}}) {
    const std::vector<absl::StatusOr<RawForwardResponse>> r = streams->Forward(parts, ids, bad);
    ASSERT_EQ(r.size(), 2u);
    for (const auto& part : r) EXPECT_TRUE(absl::IsInvalidArgument(part.status())) << part.status();
  }
  // Predecessors: one per part, each the part before it or -1.
  Parts(3, &parts, &ids);
  for (const std::vector<int>& bad :
       {std::vector<int>{-1, 0}, std::vector<int>{-1, 1, -1}, std::vector<int>{0, -1, -1},
        std::vector<int>{-1, -2, -1}, std::vector<int>{-1, -1, 0}}) {
    const std::vector<absl::StatusOr<RawForwardResponse>> r =
        streams->Forward(parts, ids, {0, 1, 0}, bad);
    for (const auto& part : r) EXPECT_TRUE(absl::IsInvalidArgument(part.status())) << part.status();
  }
  EXPECT_TRUE(service_.stream_peers().empty());
  EXPECT_TRUE(streams->Finish().ok());  // nothing open
}

TEST_F(ParallelForwardStreamsTest, StreamsOpenAgainAfterFinishAndAfterUnavailable) {
  RetryPolicy retry;
  retry.max_attempts = 3;
  retry.initial_backoff = absl::Milliseconds(1);
  std::unique_ptr<ParallelForwardStreams> streams = Make(2, &retry);
  std::vector<grpc::ByteBuffer> parts;
  std::vector<uint64_t> ids;
  Parts(4, &parts, &ids);
  ASSERT_TRUE(streams->Forward(parts, ids, {0, 1, 0, 1})[0].ok());
  EXPECT_TRUE(streams->Finish().ok());
  EXPECT_EQ(service_.stream_peers().size(), 2u);

  // The next two streams a server starts end at once with UNAVAILABLE (a
  // draining server): each connection opens a new one and resends.
  service_.Set(Behaviour::UnavailableFirst(2));
  const std::vector<absl::StatusOr<RawForwardResponse>> r =
      streams->Forward(parts, ids, {0, 1, 0, 1});
  for (size_t p = 0; p < r.size(); ++p) {
    ASSERT_TRUE(r[p].ok()) << p << ": " << r[p].status();
    EXPECT_EQ(r[p]->fields.request_id, ids[p]);
  }
  // 2 before; then 2 refused and 2 that served, whichever connection met
  // the refusals.
  EXPECT_EQ(service_.stream_peers().size(), 6u);
  EXPECT_TRUE(streams->Finish().ok());

  // Out of tries: every part gets the UNAVAILABLE.
  service_.Set(Behaviour::UnavailableFirst(100));
  for (const auto& part : streams->Forward(parts, ids, {0, 1, 0, 1})) {
    EXPECT_TRUE(absl::IsUnavailable(part.status())) << part.status();
  }
}

}  // namespace
}  // namespace gdn::client
