// Session: one server session as the client sees it — its id and the
// position of each layer (tokens that (session, layer) has consumed), which
// it fills into every Forward so the caller never counts tokens.
//
// The server accepts a Forward only at the stored position (FAILED_PRECONDITION
// otherwise, so a retried call after a timeout cannot apply twice). When that
// happens, Forward here re-reads the positions from DescribeSession (Resync)
// before returning the error, so the next call is at the right position.
//
// Threading: a Session is a value owned by one thread at a time; the
// GdnClient it uses is shared.
#ifndef GDN_CLIENT_SESSION_H_
#define GDN_CLIENT_SESSION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/gdn_client.h"

namespace gdn::client {

class Session {
 public:
  // Creates a session on the server; every layer starts at position 0. The
  // layer count comes from the server. An empty id is replaced by
  // NewSessionId() (picked here, so that a proxy can route it); sessions that
  // will share a multi-session Forward need ids of one routing key, e.g.
  // NewSessionId(group) with one group (client/routing_key.h).
  static absl::StatusOr<Session> Create(GdnClient* client, const std::string& id = "");
  // An existing session, positions read from DescribeSession.
  static absl::StatusOr<Session> Attach(GdnClient* client, const std::string& id);

  const std::string& id() const { return id_; }
  int num_layers() const { return static_cast<int>(positions_.size()); }
  // OutOfRange layers read as -1.
  int64_t position(int layer) const;

  // This session's slice of a call of `num_tokens` new tokens at `layer`.
  SequenceTokens Next(int layer, int32_t num_tokens) const;
  // Records that `layer` is now at `new_position` (after a successful call).
  void SetPosition(int layer, int64_t new_position);

  // A Forward of this session alone. On success the layer's position is the
  // server's new one; on FAILED_PRECONDITION the positions are resynced.
  absl::StatusOr<std::vector<float>> Forward(int layer, int32_t num_tokens,
                                             const ForwardInputs& inputs);
  // Reads every layer's position (and open draft) from DescribeSession.
  absl::Status Resync();

  // Speculative decoding. ForwardDraft sends `num_tokens` (2..8) draft
  // tokens: o for all of them, the layer's position after all of them.
  // Accept(layer, k) keeps the first k (1..T) locally: the layer's next
  // Forward goes at the draft's position + k, which commits it on the
  // server. Commit(k) does so now for every layer with a draft (CommitDraft:
  // end of generation). Drafts stay open on the server until then.
  absl::StatusOr<std::vector<float>> ForwardDraft(int layer, int32_t num_tokens,
                                                  const ForwardInputs& inputs);
  absl::Status Accept(int layer, int32_t accepted);
  absl::Status Commit(int32_t accepted);
  // Tokens of `layer`'s open draft (0: none).
  int32_t draft_tokens(int layer) const;

  // A child sharing this session's states (copy-on-write) and positions. An
  // empty child id is replaced by NewSessionId(RoutingKey(id())); a given one
  // must have this session's routing key (InvalidArgument otherwise).
  absl::StatusOr<Session> Fork(const std::string& child_id = "") const;
  // A child from this session's kept states at `position` (every layer at
  // `position`; see ForwardKeeping), sharing them copy-on-write.
  absl::StatusOr<Session> ForkAt(int64_t position, const std::string& child_id = "") const;
  // Forward keeping the state at every multiple of `checkpoint_interval`
  // (a multiple of 64; the layer's position a multiple of 64) inside it.
  absl::StatusOr<std::vector<float>> ForwardKeeping(int layer, int32_t num_tokens,
                                                    const ForwardInputs& inputs,
                                                    int32_t checkpoint_interval);
  absl::Status Close();

 private:
  Session(GdnClient* client, std::string id, std::vector<int64_t> positions)
      : client_(client), id_(std::move(id)), positions_(std::move(positions)) {}

  GdnClient* client_;
  std::string id_;
  std::vector<int64_t> positions_;  // [num_layers]
  std::vector<int32_t> drafts_;     // [num_layers] open draft tokens, 0: none
  friend absl::StatusOr<std::vector<float>> ForwardSessions(
      GdnClient*, int, const std::vector<Session*>&, const std::vector<int32_t>&,
      const ForwardInputs&, bool, int32_t);
};

// One Forward call at `layer` over several sessions (a model runner's batch):
// `num_tokens[i]` new tokens of `sessions[i]`, inputs packed in that order.
// Fills positions from the sessions and advances them on success; on
// FAILED_PRECONDITION resyncs every session of the call. The sessions must
// share one routing key (InvalidArgument, nothing sent, otherwise). With
// `draft`, every sequence is a draft (Session::ForwardDraft).
absl::StatusOr<std::vector<float>> ForwardSessions(
    GdnClient* client, int layer, const std::vector<Session*>& sessions,
    const std::vector<int32_t>& num_tokens, const ForwardInputs& inputs, bool draft = false,
    int32_t checkpoint_interval = 0);

}  // namespace gdn::client

#endif  // GDN_CLIENT_SESSION_H_
