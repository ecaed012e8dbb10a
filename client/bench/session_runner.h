// Runs one unit of work (workload.h) over one GdnClient: creates (or forks)
// its sessions, prefills, decodes with think time, closes, recording every
// call, the sessions' time to first output and their decode step times into
// the Recorder. Forward goes unary or over one ForwardStream per group.
//
// Forward takes the raw path, unary (client/raw_forward.h) or over one
// ForwardStream per lane and connection (client/parallel_forward_streams.h:
// --connections > 1 spreads a split call's parts over that many
// connections at once): each request is
// built once, in place (tensors referencing the factory's pool), split
// without copying when over the message limit (client/forward_parts_split.h)
// and encoded before its clock starts, so the recorded latency is the RPCs'
// and the client copies no tensor byte.
//
// A unit stops early, without counting an error, when `stop_at` passes; it
// stops at its first failed call (recorded), and closes what it created
// either way.
//
// Session ids are picked here (client/routing_key.h) so that the run works
// through a proxy routing on the session: the sessions of one Forward share
// one routing key (a group per lane; a fork's children take the parent's).
// UNAVAILABLE is retried (the client's policy): unary calls by ForwardRaw, a
// stream by opening a new one and resending the unanswered request.
#ifndef GDN_CLIENT_BENCH_SESSION_RUNNER_H_
#define GDN_CLIENT_BENCH_SESSION_RUNNER_H_

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "client/forward_channel.h"
#include "client/bench/recorder.h"
#include "client/bench/request_factory.h"
#include "client/bench/shm_transport.h"
#include "client/bench/workload.h"
#include "client/gdn_client.h"
#include "grpcpp/support/byte_buffer.h"

namespace gdn::client::bench {

// What each session of a unit does.
struct SessionWork {
  int prefill_tokens = 0;
  int decode_steps = 0;
};

struct UnitPlan {
  int shared_prefix_tokens = 0;     // fork mode: the parent's prefill
  bool fork = false;
  std::vector<SessionWork> sessions;  // the group, or the parent's children
};

// Draws a unit from the config's length specs (or `trace_record`, when given).
UnitPlan MakeUnitPlan(const BenchConfig& config, std::mt19937_64& rng,
                      const TraceRecord* trace_record = nullptr);

class SessionRunner {
 public:
  SessionRunner(GdnClient* client, const RequestFactory* factory, const BenchConfig& config,
                Recorder* recorder, Clock::time_point stop_at, uint64_t seed);

  // True when every call succeeded. `start` is the sessions' start time
  // (open loop: the scheduled arrival).
  bool RunUnit(const UnitPlan& plan, Clock::time_point start);
  // Closes the warm parent (--warm_prefix), if any.
  ~SessionRunner();

 private:
  struct Lane;  // sessions driven together, one Forward per layer
  // `session_metrics`: record TTFO for the lane's sessions (not for a
  // fork parent, whose prefill is the children's shared prefix).
  bool RunLane(Lane& lane, Clock::time_point start, std::mt19937_64& rng, bool session_metrics);
  bool Forward(Lane& lane, const std::vector<SequenceSlot>& seqs, int layer, bool prefill,
               std::mt19937_64& rng);
  // --transport=stream: the encoded parts (request ids `ids`) over the
  // lane's streams, part p on connection connection_of[p] (continuing part
  // predecessor[p], or -1); each connection's parts all sent, then all
  // received.
  absl::Status ForwardOnStreams(Lane& lane, const std::vector<grpc::ByteBuffer>& parts,
                                const std::vector<uint64_t>& ids,
                                const std::vector<int>& connection_of,
                                const std::vector<int>& predecessor);
  // `n` sessions, in lanes of sessions_per_call sharing one routing key.
  bool CreateSessions(int n, std::vector<std::string>* ids);
  // `at`: fork at that kept position (--fork_at_checkpoint), else at the end.
  bool ForkSessions(const std::string& parent, int n, std::vector<std::string>* ids,
                    std::optional<int64_t> at = std::nullopt);
  bool CloseSessions(const std::vector<std::string>& ids);
  // The parent of a fork unit, prefilled (every layer) with the shared
  // prefix, or empty (and *ok false) when that failed.
  std::vector<std::string> PrefilledParent(const UnitPlan& plan, Clock::time_point start, bool* ok);
  bool TimeUp() const;

  GdnClient* const client_;
  const RequestFactory* const factory_;
  const BenchConfig& config_;
  Recorder* const recorder_;
  const Clock::time_point stop_at_;
  std::mt19937_64 rng_;
  // --transport=shm / cuda_ipc: the pools in a registered region (null
  // otherwise; regions_status_ says why when creating it failed).
  std::unique_ptr<RegionTransport> regions_;
  absl::Status regions_status_;
  // --control=channel: one slot per lane of a unit (null otherwise;
  // channel_status_ says why when opening it failed).
  std::unique_ptr<ForwardChannel> channel_;
  absl::Status channel_status_;
  // The client's effective message limit, asked once (it never changes
  // while a server runs): the limit unary requests are split at.
  int64_t message_limit_ = 0;
  // What a call's request is split at: message_limit_, or the smaller
  // --part_bytes (parts pipelined over the stream).
  int64_t part_limit_ = 0;
  // --transport=stream: the connections a lane's streams go over (the
  // client's channel, then --connections - 1 channels of their own).
  std::vector<std::shared_ptr<grpc::Channel>> stream_channels_;
  // --warm_prefix: this runner's parent, kept across units (empty until the
  // first fork unit prefilled it).
  std::vector<std::string> warm_parent_;
};

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_SESSION_RUNNER_H_
