#include "client/bench/session_runner.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/bench/cuda_ipc_transport.h"
#include "client/forward_parts_split.h"
#include "client/forward_split.h"
#include "client/parallel_forward_streams.h"
#include "client/raw_forward.h"
#include "client/retry.h"
#include "client/routing_key.h"

namespace gdn::client::bench {

struct SessionRunner::Lane {
  int index = 0;  // in its unit: the channel slot it calls through
  std::vector<std::string> ids;
  std::vector<int64_t> positions;
  std::vector<SessionWork> work;
  int32_t keep_interval = 0;  // prefills keep states (--fork_at_checkpoint)
  RawCallOptions raw;  // the client's call settings, the lane's route
  std::unique_ptr<ParallelForwardStreams> streams;  // --transport=stream: made, or null
  uint64_t next_request_id = 1;               // stream requests carry ids 1, 2, ...
  std::unique_ptr<RegionTransport::Output> o_region;  // shm / cuda_ipc: where o goes
};

UnitPlan MakeUnitPlan(const BenchConfig& config, std::mt19937_64& rng,
                      const TraceRecord* trace_record) {
  UnitPlan plan;
  plan.fork = config.fork_fanout > 0;
  plan.shared_prefix_tokens = config.shared_prefix_tokens;
  const int n = UnitSessions(config);
  for (int i = 0; i < n; ++i) {
    SessionWork w;
    if (trace_record != nullptr) {
      w.prefill_tokens = trace_record->prefill_tokens;
      w.decode_steps = trace_record->decode_steps;
    } else {
      w.prefill_tokens = config.prefill_tokens.Sample(rng);
      w.decode_steps = config.decode_steps.Sample(rng);
    }
    if (w.prefill_tokens + w.decode_steps == 0) w.decode_steps = 1;  // every session does something
    plan.sessions.push_back(w);
  }
  return plan;
}

SessionRunner::SessionRunner(GdnClient* client, const RequestFactory* factory,
                             const BenchConfig& config, Recorder* recorder,
                             Clock::time_point stop_at, uint64_t seed)
    : client_(client), factory_(factory), config_(config), recorder_(recorder),
      stop_at_(stop_at), rng_(seed), message_limit_(client->EffectiveMessageLimit()),
      part_limit_(config.part_bytes > 0 ? std::min(config.part_bytes, message_limit_)
                                        : message_limit_) {
  if (config.stream) {
    stream_channels_.push_back(client->channel());
    for (int i = 1; i < config.connections; ++i) {
      stream_channels_.push_back(MakeGdnChannel(config.server, client->options(), i));
    }
  }
  if (config.shm || config.cuda_ipc) {
    absl::StatusOr<std::unique_ptr<RegionTransport>> regions =
        config.shm ? absl::StatusOr<std::unique_ptr<RegionTransport>>(
                         ShmTransport::Create(client->channel(), factory->PoolSpans()))
                   : CreateCudaIpcTransport(client->channel(), factory->PoolSpans(), 0);
    if (regions.ok()) {
      regions_ = std::move(*regions);
    } else {
      regions_status_ = regions.status();
    }
  }
  if (config.channel) {
    ForwardChannelOptions options;
    const int group = std::max(1, config.sessions_per_call);
    options.slots = static_cast<uint32_t>((UnitSessions(config) + group - 1) / group);
    // Inline tensors must fit a slot: room for the largest message (split
    // under the message limit, like the RPC's). Untouched slot bytes cost
    // no memory (shm pages are allocated when first written).
    const uint64_t capacity = std::min<uint64_t>(message_limit_, 64 << 20) + (64 << 10);
    options.request_capacity = capacity;
    options.response_capacity = capacity;
    absl::StatusOr<std::unique_ptr<ForwardChannel>> opened =
        ForwardChannel::Open(client->channel(), absl::StrCat("bench-", seed % 1000000), options);
    if (opened.ok()) {
      channel_ = std::move(*opened);
    } else {
      channel_status_ = opened.status();
    }
  }
}

bool SessionRunner::TimeUp() const { return Clock::now() >= stop_at_; }

bool SessionRunner::CreateSessions(int n, std::vector<std::string>* ids) {
  std::string group;
  for (int i = 0; i < n; ++i) {
    if (i % config_.sessions_per_call == 0) group = NewRouteGroup();
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<std::string> id = client_->CreateSession(NewSessionId(group));
    recorder_->RecordCall(CallType::kCreate, t0, Clock::now(), id.status());
    if (!id.ok()) return false;
    ids->push_back(*id);
  }
  return true;
}

bool SessionRunner::ForkSessions(const std::string& parent, int n, std::vector<std::string>* ids,
                                 std::optional<int64_t> at) {
  for (int i = 0; i < n; ++i) {
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<std::string> id =
        client_->ForkSession(parent, NewSessionId(RoutingKey(parent)), at);
    recorder_->RecordCall(CallType::kFork, t0, Clock::now(), id.status());
    if (!id.ok()) return false;
    ids->push_back(*id);
  }
  return true;
}

bool SessionRunner::CloseSessions(const std::vector<std::string>& ids) {
  bool ok = true;
  for (const std::string& id : ids) {
    const Clock::time_point t0 = Clock::now();
    absl::Status closed = client_->CloseSession(id);
    recorder_->RecordCall(CallType::kClose, t0, Clock::now(), closed);
    ok = ok && closed.ok();
  }
  return ok;
}

bool SessionRunner::Forward(Lane& lane, const std::vector<SequenceSlot>& seqs, int layer,
                            bool prefill, std::mt19937_64& rng) {
  int64_t tokens = 0;
  for (const SequenceSlot& s : seqs) tokens += s.num_tokens;
  const CallType type = prefill ? CallType::kPrefill : CallType::kDecode;

  // Built in place and encoded before the clock starts; the tensors are
  // references into the factory's pool, split (when over the message limit)
  // into parts that reference sub-ranges of it: no tensor byte is copied on
  // the client. The clock covers the RPCs only.
  absl::StatusOr<std::vector<ForwardPartRefs>> parts = SplitForwardRequestParts(
      factory_->BuildParts(layer, seqs, rng), part_limit_);
  if (parts.ok() && (config_.shm || config_.cuda_ipc)) {
    for (size_t p = 0; p < parts->size() && parts.ok(); ++p) {
      absl::Status s = regions_ != nullptr
                           ? regions_->UseRegions(&(*parts)[p].request, &lane.o_region)
                           : regions_status_;
      if (!s.ok()) parts = s;
    }
  }
  std::vector<grpc::ByteBuffer> messages;
  std::vector<uint64_t> ids;  // stream: each part's request id
  std::vector<int> connection_of;  // stream: each part's connection, in turn
  std::vector<int> predecessor;    // stream: the part each continues, or -1
  if (parts.ok() && config_.stream) {
    connection_of = ConnectionsInTurn(parts->size(), config_.connections);
    predecessor = PartPredecessors(*parts);
  }
  if (parts.ok()) {
    messages.resize(parts->size());
    for (size_t p = 0; p < parts->size(); ++p) {
      if (config_.stream) {
        (*parts)[p].request.request_id = lane.next_request_id++;
        ids.push_back((*parts)[p].request.request_id);
      }
      grpc::ByteBuffer encoded = wire::EncodeForwardRequest((*parts)[p].request);
      messages[p].Swap(&encoded);  // ByteBuffer has no move; a copy would allocate
    }
  }
  const Clock::time_point t0 = Clock::now();
  absl::Status status = parts.status();
  if (status.ok() && config_.stream) {
    status = ForwardOnStreams(lane, messages, ids, connection_of, predecessor);
  } else {
    for (size_t p = 0; p < messages.size() && status.ok(); ++p) {
      if (config_.channel) {
        status = channel_ != nullptr
                     ? channel_->Forward(static_cast<uint32_t>(lane.index), messages[p]).status()
                     : channel_status_;
      } else {
        status = ForwardRaw(client_->channel(), messages[p], lane.raw).status();
      }
      status = SplitPartStatus(status, p, messages.size());
    }
  }
  const Clock::time_point t1 = Clock::now();
  // Parts the client split it into (the server counts each).
  const int64_t rpcs = std::max<int64_t>(1, static_cast<int64_t>(messages.size()));
  if (config_.stream) {
    // The server counts each stream message as one "ForwardStream" request.
    for (int64_t i = 0; i < rpcs; ++i) recorder_->RecordRpc("ForwardStream", status);
    recorder_->RecordCall(type, t0, t1, status, tokens, 0);
  } else {
    recorder_->RecordCall(type, t0, t1, status, tokens, rpcs);
  }
  return status.ok();
}

absl::Status SessionRunner::ForwardOnStreams(Lane& lane,
                                             const std::vector<grpc::ByteBuffer>& parts,
                                             const std::vector<uint64_t>& ids,
                                             const std::vector<int>& connection_of,
                                             const std::vector<int>& predecessor) {
  if (lane.streams == nullptr) {
    const GdnClientOptions& o = client_->options();
    const int64_t poll_us = config_.connection_poll_us >= 0
                                ? config_.connection_poll_us
                                : (std::thread::hardware_concurrency() >= 8 ? 1000 : 0);
    lane.streams = std::make_unique<ParallelForwardStreams>(
        stream_channels_, lane.raw, o.retry, o.on_retry, absl::Microseconds(poll_us));
  }
  const std::vector<absl::StatusOr<RawForwardResponse>> results =
      lane.streams->Forward(parts, ids, connection_of, predecessor);
  const size_t failed = FirstOwnFailure(results);
  return failed == results.size()
             ? absl::OkStatus()
             : SplitPartStatus(results[failed].status(), failed, parts.size());
}

bool SessionRunner::RunLane(Lane& lane, Clock::time_point start, std::mt19937_64& rng,
                            bool session_metrics) {
  lane.raw = RawCallOptionsFor(client_->options(), RoutingKey(lane.ids[0]));
  if (config_.stream) {
    // The stream is the lane's whole life: no per-call deadline on it.
    lane.raw.deadline = absl::InfiniteDuration();
  }
  bool ok = true;
  bool first_output_seen = false;
  auto first_output = [&](Clock::time_point t) {
    if (first_output_seen || !session_metrics) return;
    first_output_seen = true;
    for (size_t i = 0; i < lane.ids.size(); ++i) recorder_->RecordTtfo(start, t);
  };
  // Prefill: sessions with tokens to prefill, one Forward per layer.
  std::vector<SequenceSlot> seqs;
  for (size_t i = 0; i < lane.ids.size(); ++i) {
    if (lane.work[i].prefill_tokens > 0) {
      seqs.push_back({lane.ids[i], lane.positions[i], lane.work[i].prefill_tokens, false,
                      lane.keep_interval});
    }
  }
  if (!seqs.empty()) {
    for (int layer = 0; layer < config_.layers && ok; ++layer) {
      if (TimeUp()) return false;
      ok = Forward(lane, seqs, layer, /*prefill=*/true, rng);
    }
    if (!ok) return false;
    for (size_t i = 0; i < lane.ids.size(); ++i) lane.positions[i] += lane.work[i].prefill_tokens;
    first_output(Clock::now());
  }
  // Decode: per step one token for each session that still decodes.
  int steps = 0;
  for (const SessionWork& w : lane.work) steps = std::max(steps, w.decode_steps);
  for (int step = 0; step < steps && ok; ++step) {
    seqs.clear();
    std::vector<size_t> who;
    const bool draft = config_.draft_tokens > 0;
    for (size_t i = 0; i < lane.ids.size(); ++i) {
      if (step < lane.work[i].decode_steps) {
        seqs.push_back({lane.ids[i], lane.positions[i],
                        draft ? config_.draft_tokens : config_.decode_tokens, draft});
        who.push_back(i);
      }
    }
    const Clock::time_point t0 = Clock::now();
    for (int layer = 0; layer < config_.layers && ok; ++layer) {
      if (TimeUp()) return false;
      ok = Forward(lane, seqs, layer, /*prefill=*/false, rng);
    }
    if (!ok) return false;
    const Clock::time_point t1 = Clock::now();
    recorder_->RecordDecodeStep(t0, t1);
    first_output(t1);
    if (!draft) {
      for (size_t i : who) lane.positions[i] += config_.decode_tokens;
    } else {
      // The first draft token always stands (the target model's own); each
      // later one with probability acceptance_rate, up to the first miss.
      std::bernoulli_distribution accept(config_.acceptance_rate);
      int64_t accepted_sum = 0;
      for (size_t i : who) {
        int accepted = 1;
        while (accepted < config_.draft_tokens && accept(rng)) ++accepted;
        lane.positions[i] += accepted;
        accepted_sum += accepted;
      }
      recorder_->RecordDraft(static_cast<int64_t>(who.size()) * config_.draft_tokens,
                             accepted_sum);
    }
    if (config_.think_ms > 0 && step + 1 < steps) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(config_.think_ms));
    }
  }
  if (lane.streams != nullptr) {
    absl::Status finished = lane.streams->Finish();
    if (!finished.ok()) ok = false;
  }
  return ok;
}

SessionRunner::~SessionRunner() {
  if (!warm_parent_.empty()) CloseSessions(warm_parent_);
}

std::vector<std::string> SessionRunner::PrefilledParent(const UnitPlan& plan,
                                                        Clock::time_point start, bool* ok) {
  std::vector<std::string> parent;
  *ok = CreateSessions(1, &parent);
  // --fork_at_checkpoint=N: the parent goes N tokens past the prefix,
  // keeping a state every N; the children fork at the last one within it.
  const int checkpoint = config_.fork_at_checkpoint;
  if (*ok && plan.shared_prefix_tokens > 0) {
    Lane lane;
    lane.ids = parent;
    lane.positions = {0};
    lane.work = {{plan.shared_prefix_tokens + checkpoint, 0}};
    lane.keep_interval = checkpoint;
    const Clock::time_point t0 = Clock::now();
    *ok = RunLane(lane, start, rng_, /*session_metrics=*/false);
    if (*ok && checkpoint > 0) recorder_->RecordSharedPrefill(t0, Clock::now());
  }
  if (!*ok && !parent.empty()) {
    CloseSessions(parent);
    parent.clear();
  }
  return parent;
}

bool SessionRunner::RunUnit(const UnitPlan& plan, Clock::time_point start) {
  const int group = config_.sessions_per_call;
  recorder_->RecordSessionStarts(start, static_cast<int>(plan.sessions.size()));
  std::vector<std::string> children;
  bool ok = true;
  // Where the children start: the prefix's end, or its last checkpoint.
  const int64_t fork_position =
      config_.fork_at_checkpoint > 0
          ? plan.shared_prefix_tokens / config_.fork_at_checkpoint * config_.fork_at_checkpoint
          : plan.shared_prefix_tokens;
  if (!plan.fork) {
    ok = CreateSessions(static_cast<int>(plan.sessions.size()), &children);
  } else {
    // The shared prefix: one parent prefilled over every layer (or the warm
    // one of an earlier unit), then forked.
    std::vector<std::string> parent = warm_parent_;
    if (parent.empty()) parent = PrefilledParent(plan, start, &ok);
    if (ok) {
      ok = ForkSessions(parent[0], static_cast<int>(plan.sessions.size()), &children,
                        config_.fork_at_checkpoint > 0 ? std::optional<int64_t>(fork_position)
                                                       : std::nullopt);
    }
    if (ok && config_.warm_prefix) {
      warm_parent_ = parent;
    } else if (!parent.empty()) {
      ok = CloseSessions(parent) && ok;
      warm_parent_.clear();
    }
  }
  if (ok) {
    // Lanes of `group` sessions; the first runs here, the others on threads.
    const int lanes = (static_cast<int>(children.size()) + group - 1) / group;
    std::vector<Lane> lane(lanes);
    for (size_t i = 0; i < children.size(); ++i) {
      Lane& l = lane[i / group];
      l.index = static_cast<int>(i / group);
      l.ids.push_back(children[i]);
      l.positions.push_back(plan.fork ? fork_position : 0);
      l.work.push_back(plan.sessions[i]);
      // Forked at a checkpoint: the rest of the shared prefix is its own.
      if (plan.fork) l.work.back().prefill_tokens += plan.shared_prefix_tokens - fork_position;
    }
    std::vector<char> lane_ok(lanes, 0);
    std::vector<std::thread> threads;
    for (int i = 1; i < lanes; ++i) {
      const uint64_t seed = rng_();
      threads.emplace_back([&, i, seed] {
        std::mt19937_64 rng(seed);
        lane_ok[i] = RunLane(lane[i], start, rng, /*session_metrics=*/true);
      });
    }
    if (lanes > 0) lane_ok[0] = RunLane(lane[0], start, rng_, /*session_metrics=*/true);
    for (std::thread& t : threads) t.join();
    for (char l : lane_ok) ok = ok && l;
  }
  ok = CloseSessions(children) && ok;
  recorder_->RecordUnitDone(start, static_cast<int>(children.size()), ok);
  return ok;
}

}  // namespace gdn::client::bench
