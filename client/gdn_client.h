// GdnClient: the C++ client of gdn.v1.GdnService (proto/gdn/v1/gdn.proto).
//
// Every call returns absl::Status / StatusOr; gRPC statuses are mapped in one
// place (client/grpc_status.h). Each call gets the options' deadline.
//
// Forward comes in two forms:
//   - raw: a ForwardRequest in, a ForwardResponse out (tensors as the wire
//     has them);
//   - typed: per-session token counts and fp32 tensors, converted to the
//     server's activation dtype (rounded once) and o converted back to fp32.
// Both split a request larger than the message size (the smaller of the
// client's and the server's limit) into several calls sent in order
// (client/forward_split.h), so a long prefill needs no care from the caller.
// A third path, bytes in and out with no protobuf message and no tensor copy,
// is client/raw_forward.h over channel() (gdn-bench's unary Forward).
//
// Behind a proxy (deploy/README.md, "Scale it"): every call that names a
// session carries its routing key in the `x-gdn-route` header
// (client/routing_key.h), and every call is retried on UNAVAILABLE with
// bounded backoff (client/retry.h, options().retry), which rides out a
// server's drain. With options().session_affinity a call over sessions of
// different routing keys (a multi-session Forward, a fork into another key)
// is refused here with InvalidArgument. Ids must be chosen by the client
// there (NewSessionId): an empty id lets the server pick one, which a proxy
// cannot route.
//
// Threading: a GdnClient is safe to use from many threads at once (gRPC stubs
// are; the cached server info is behind a mutex). A ForwardStream is not: one
// thread may Send while one other thread Receives.
#ifndef GDN_CLIENT_GDN_CLIENT_H_
#define GDN_CLIENT_GDN_CLIENT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/retry.h"
#include "client/session_snapshot.h"
#include "gdn/v1/gdn.grpc.pb.h"
#include "gdn/v1/gdn.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "client/channel_security.h"
#include "proto/grpc_transport.h"

namespace gdn::client {

struct GdnClientOptions {
  // Largest message sent or received (gRPC's default receive limit is 4 MiB;
  // a default-shape prefill of a few hundred tokens is already larger).
  int64_t max_message_bytes = 64 << 20;
  // Per call; absl::InfiniteDuration() for none.
  absl::Duration deadline = absl::Seconds(120);
  // Bytes of state per ImportSession chunk.
  int64_t import_chunk_bytes = 1 << 20;
  // UNAVAILABLE is retried under this policy (max_attempts = 1: never); each
  // try gets `deadline` anew.
  RetryPolicy retry;
  // Told of each retried try (gdn-bench counts them); may be empty. Called
  // from the calling thread.
  RetryObserver on_retry;
  // HTTP/2 window, frame and read sizes of the channel (proto/grpc_transport.h:
  // tuned for multi-MiB messages by default; zeros keep gRPC's defaults).
  // Its max_message_bytes is not used: max_message_bytes above is the limit.
  wire::TransportOptions transport;
  // True when the target is a proxy routing on `x-gdn-route` (or may be):
  // calls over sessions of different routing keys are refused with
  // InvalidArgument before anything is sent, since they may live on
  // different servers. False (one server, reached directly): the header is
  // sent all the same, and nothing is refused.
  bool session_affinity = false;
  // TLS and the bearer token (client/channel_security.h) of channels made by
  // MakeGdnChannel and GdnClient(target, ...).
  ChannelSecurity security;
};

// A channel to `target` ("host:port" or "unix:/path") sized for the options'
// message limit, with the options' transport settings. `channel_index` makes
// channels to the same target distinct connections (several channels spread
// load over several TCP connections).
std::shared_ptr<grpc::Channel> MakeGdnChannel(const std::string& target,
                                              const GdnClientOptions& options,
                                              int channel_index = 0);

// One session's slice of a typed Forward call.
struct SequenceTokens {
  std::string session_id;
  int64_t position = 0;    // tokens this (session, layer) consumed before
  int32_t num_tokens = 0;  // new tokens, >= 1
  // A speculative draft (2..8 tokens): the state after each token is kept
  // until the next call's position (or CommitDraft) accepts some.
  bool draft = false;
  // Prefix reuse: keep the state at every multiple of this (a multiple of
  // 64; position a multiple of 64) inside the sequence, for forks there.
  int32_t checkpoint_interval = 0;
};

// fp32 inputs of a typed Forward, packed over T = sum of num_tokens tokens in
// the order of the sequences. Only the fields of the server's gating mode are
// sent: direct needs g and beta, fused needs a, b, a_log and dt_bias.
struct ForwardInputs {
  std::vector<float> q;        // [T, Hqk, K]
  std::vector<float> k;        // [T, Hqk, K]
  std::vector<float> v;        // [T, Hv, V]
  std::vector<float> g;        // [T, Hv]
  std::vector<float> beta;     // [T, Hv]
  std::vector<float> a;        // [T, Hv]
  std::vector<float> b;        // [T, Hv]
  std::vector<float> a_log;    // [Hv]
  std::vector<float> dt_bias;  // [Hv]
};

struct ForwardOutputs {
  std::vector<float> o;            // [T, Hv, V], activation dtype -> fp32
  std::vector<int64_t> positions;  // new position of each sequence
};

class ForwardStream;

class GdnClient {
 public:
  explicit GdnClient(const std::string& target, GdnClientOptions options = {});
  GdnClient(std::shared_ptr<grpc::Channel> channel, GdnClientOptions options = {});

  GdnClient(const GdnClient&) = delete;
  GdnClient& operator=(const GdnClient&) = delete;

  const GdnClientOptions& options() const { return options_; }
  // The channel every call goes through (for the raw path, raw_forward.h).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  absl::StatusOr<v1::ServerInfoResponse> GetServerInfo();
  // The first successful GetServerInfo, kept (the layer config of a server
  // never changes while it runs).
  absl::StatusOr<v1::ServerInfoResponse> CachedServerInfo();

  // Empty id: the server picks one (not through a proxy: NewSessionId).
  // Returns the session's id. A retried create that finds its id taken
  // (ALREADY_EXISTS after an earlier try of this call) counts as done.
  absl::StatusOr<std::string> CreateSession(const std::string& id = "");
  absl::Status CloseSession(const std::string& id);
  // With session_affinity a non-empty child id must have the parent's
  // routing key (InvalidArgument otherwise); empty: the server picks one
  // (not through a proxy).
  // With `at_position`, the child starts from the parent's kept states there
  // (SequenceTokens::checkpoint_interval; gdn.proto ForkSessionRequest).
  absl::StatusOr<std::string> ForkSession(const std::string& parent_id,
                                          const std::string& child_id = "",
                                          std::optional<int64_t> at_position = std::nullopt);
  absl::StatusOr<v1::DescribeSessionResponse> DescribeSession(
      const std::string& id);
  // Accepts position - p tokens of the open drafts of `layers` (empty: every
  // layer with one) without a Forward call (gdn.proto CommitDraftRequest).
  absl::StatusOr<v1::CommitDraftResponse> CommitDraft(const std::string& id, int64_t position,
                                                      const std::vector<int32_t>& layers = {});
  // The sessions of the server this call reaches (through a proxy: one
  // server of several; ask each server directly for all of them).
  // Every session of the caller (its tenant's when the server has tokens),
  // in id order, following the pages.
  absl::StatusOr<std::vector<std::string>> ListSessions();
  // One page: at most page_size ids (0: the server's default) after
  // page_token (a previous page's next_page_token; "" for the first).
  absl::StatusOr<v1::ListSessionsResponse> ListSessionsPage(int32_t page_size,
                                                           const std::string& page_token);

  // Raw Forward, split into several calls when larger than the message size.
  absl::StatusOr<v1::ForwardResponse> Forward(const v1::ForwardRequest& request);
  // Typed Forward: converts the inputs to the server's activation dtype.
  absl::StatusOr<ForwardOutputs> Forward(int32_t layer,
                                         const std::vector<SequenceTokens>& sequences,
                                         const ForwardInputs& inputs);
  // The ForwardRequest the typed Forward sends (before any split).
  absl::StatusOr<v1::ForwardRequest> BuildForwardRequest(
      int32_t layer, const std::vector<SequenceTokens>& sequences,
      const ForwardInputs& inputs);

  // Every chunk of the session's export, collected.
  absl::StatusOr<SessionSnapshot> ExportSession(const std::string& id);
  // Streams `snapshot` in chunks; a non-empty `as_id` imports it under that id.
  absl::StatusOr<v1::ImportSessionResponse> ImportSession(
      const SessionSnapshot& snapshot, const std::string& as_id = "");

  // An ordered stream of Forward calls (see ForwardStream). Behind a proxy
  // pass the routing key of the sessions it will carry (RoutingKey(id)): the
  // stream reaches one server, and with session_affinity Send refuses a
  // request for another key.
  std::unique_ptr<ForwardStream> OpenForwardStream(const std::string& route_key = "");

  // The smaller of the client's and (when known) the server's message limit.
  int64_t EffectiveMessageLimit();

 private:
  // A context with the deadline and, for a non-empty key, the route header.
  std::unique_ptr<grpc::ClientContext> NewContext(const std::string& route_key = "") const;
  // Runs `call` under options_.retry.
  absl::Status Retry(absl::string_view method, const std::function<absl::Status(int)>& call);
  absl::StatusOr<v1::ForwardResponse> ForwardOnce(const v1::ForwardRequest& request,
                                                  const std::string& route_key);

  GdnClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::GdnService::Stub> stub_;

  absl::Mutex info_mu_;
  bool have_info_ ABSL_GUARDED_BY(info_mu_) = false;
  v1::ServerInfoResponse info_ ABSL_GUARDED_BY(info_mu_);
};

// Forward calls over one ForwardStream RPC: the server answers in request
// order, and a failed request does not end the stream (its response carries
// error_code). Send assigns request ids 1, 2, ... when the request has none;
// Receive returns the next response in order, or its error as a Status.
// One thread may Send while another Receives; neither is safe from two.
class ForwardStream {
 public:
  // `route_key`: the key the context's header carries ("" for none); a
  // non-empty `check_key` refuses requests of any other key.
  ForwardStream(v1::GdnService::Stub* stub, std::unique_ptr<grpc::ClientContext> context,
                std::string check_key = "");
  ~ForwardStream();

  // The request id it was sent with. InvalidArgument (nothing sent) when the
  // stream checks a routing key and the request's sessions have another.
  absl::StatusOr<uint64_t> Send(v1::ForwardRequest request);
  // The next response; its error_code as a Status when the request failed.
  // Internal when the server answered out of order.
  absl::StatusOr<v1::ForwardResponse> Receive();
  // Ends the sending side and waits for the RPC's final status. Responses not
  // yet received are read and dropped.
  absl::Status Finish();
  // Cancels the RPC (any pending Receive returns an error).
  void Cancel();

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  const std::string route_key_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ForwardRequest, v1::ForwardResponse>> stream_;
  absl::Mutex mu_;
  std::deque<uint64_t> in_flight_ ABSL_GUARDED_BY(mu_);  // ids sent, not received
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool writes_done_ = false;
  bool finished_ = false;
};

}  // namespace gdn::client

#endif  // GDN_CLIENT_GDN_CLIENT_H_
