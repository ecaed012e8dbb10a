#include "client/session.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/routing_key.h"

namespace gdn::client {

absl::StatusOr<Session> Session::Create(GdnClient* client, const std::string& id) {
  absl::StatusOr<v1::ServerInfoResponse> info = client->CachedServerInfo();
  if (!info.ok()) return info.status();
  absl::StatusOr<std::string> created =
      client->CreateSession(id.empty() ? NewSessionId() : id);
  if (!created.ok()) return created.status();
  return Session(client, *std::move(created),
                 std::vector<int64_t>(info->config().num_layers(), 0));
}

absl::StatusOr<Session> Session::Attach(GdnClient* client, const std::string& id) {
  Session session(client, id, {});
  absl::Status status = session.Resync();
  if (!status.ok()) return status;
  return session;
}

int64_t Session::position(int layer) const {
  if (layer < 0 || layer >= num_layers()) return -1;
  return positions_[layer];
}

SequenceTokens Session::Next(int layer, int32_t num_tokens) const {
  SequenceTokens s;
  s.session_id = id_;
  s.position = position(layer);
  s.num_tokens = num_tokens;
  return s;
}

void Session::SetPosition(int layer, int64_t new_position) {
  if (layer >= 0 && layer < num_layers()) positions_[layer] = new_position;
}

absl::Status Session::Resync() {
  absl::StatusOr<v1::DescribeSessionResponse> described = client_->DescribeSession(id_);
  if (!described.ok()) return described.status();
  // Layers the description leaves out are at position 0 (never written).
  int num_layers = static_cast<int>(positions_.size());
  absl::StatusOr<v1::ServerInfoResponse> info = client_->CachedServerInfo();
  if (info.ok()) num_layers = std::max(num_layers, info->config().num_layers());
  for (const v1::LayerStateInfo& l : described->layers()) {
    num_layers = std::max(num_layers, l.layer() + 1);
  }
  positions_.assign(num_layers, 0);
  drafts_.assign(num_layers, 0);
  for (const v1::LayerStateInfo& l : described->layers()) {
    if (l.layer() >= 0) positions_[l.layer()] = l.position();
    if (l.layer() >= 0) drafts_[l.layer()] = l.draft_tokens();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Session::Forward(int layer, int32_t num_tokens,
                                                    const ForwardInputs& inputs) {
  return ForwardSessions(client_, layer, {this}, {num_tokens}, inputs);
}

absl::StatusOr<std::vector<float>> Session::ForwardDraft(int layer, int32_t num_tokens,
                                                         const ForwardInputs& inputs) {
  return ForwardSessions(client_, layer, {this}, {num_tokens}, inputs, /*draft=*/true);
}

int32_t Session::draft_tokens(int layer) const {
  return layer >= 0 && layer < static_cast<int>(drafts_.size()) ? drafts_[layer] : 0;
}

absl::Status Session::Accept(int layer, int32_t accepted) {
  const int32_t tokens = draft_tokens(layer);
  if (tokens == 0) {
    return absl::FailedPreconditionError(absl::StrCat("layer ", layer, " has no open draft"));
  }
  if (accepted < 1 || accepted > tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("accepted ", accepted, " of a draft of ", tokens, " tokens"));
  }
  positions_[layer] -= tokens - accepted;
  drafts_[layer] = 0;
  return absl::OkStatus();
}

absl::Status Session::Commit(int32_t accepted) {
  // One CommitDraft per draft start position (layers usually share one).
  std::map<int64_t, std::vector<int32_t>> by_base;
  for (int layer = 0; layer < static_cast<int>(drafts_.size()); ++layer) {
    if (drafts_[layer] == 0) continue;
    if (accepted < 1 || accepted > drafts_[layer]) {
      return absl::InvalidArgumentError(absl::StrCat("accepted ", accepted, " of layer ", layer,
                                                     "'s draft of ", drafts_[layer], " tokens"));
    }
    by_base[positions_[layer] - drafts_[layer]].push_back(layer);
  }
  for (const auto& [base, layers] : by_base) {
    absl::StatusOr<v1::CommitDraftResponse> done =
        client_->CommitDraft(id_, base + accepted, layers);
    if (!done.ok()) return done.status();
    for (int32_t layer : layers) Accept(layer, accepted).IgnoreError();
  }
  return absl::OkStatus();
}

absl::StatusOr<Session> Session::Fork(const std::string& child_id) const {
  absl::StatusOr<std::string> child =
      client_->ForkSession(id_, child_id.empty() ? NewSessionId(RoutingKey(id_)) : child_id);
  if (!child.ok()) return child.status();
  return Session(client_, *std::move(child), positions_);
}

absl::StatusOr<Session> Session::ForkAt(int64_t position, const std::string& child_id) const {
  absl::StatusOr<std::string> child = client_->ForkSession(
      id_, child_id.empty() ? NewSessionId(RoutingKey(id_)) : child_id, position);
  if (!child.ok()) return child.status();
  return Session(client_, *std::move(child), std::vector<int64_t>(positions_.size(), position));
}

absl::StatusOr<std::vector<float>> Session::ForwardKeeping(int layer, int32_t num_tokens,
                                                           const ForwardInputs& inputs,
                                                           int32_t checkpoint_interval) {
  return ForwardSessions(client_, layer, {this}, {num_tokens}, inputs, false,
                         checkpoint_interval);
}

absl::Status Session::Close() { return client_->CloseSession(id_); }

absl::StatusOr<std::vector<float>> ForwardSessions(
    GdnClient* client, int layer, const std::vector<Session*>& sessions,
    const std::vector<int32_t>& num_tokens, const ForwardInputs& inputs, bool draft,
    int32_t checkpoint_interval) {
  if (sessions.size() != num_tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        sessions.size(), " sessions but ", num_tokens.size(), " token counts"));
  }
  std::vector<SequenceTokens> specs;
  specs.reserve(sessions.size());
  for (size_t i = 0; i < sessions.size(); ++i) {
    specs.push_back(sessions[i]->Next(layer, num_tokens[i]));
    specs.back().draft = draft;
    specs.back().checkpoint_interval = checkpoint_interval;
  }
  absl::StatusOr<ForwardOutputs> out = client->Forward(layer, specs, inputs);
  if (!out.ok()) {
    if (absl::IsFailedPrecondition(out.status())) {
      for (Session* s : sessions) s->Resync().IgnoreError();
    }
    return out.status();
  }
  if (out->positions.size() != sessions.size()) {
    return absl::InternalError(absl::StrCat("server returned ", out->positions.size(),
                                            " positions for ", sessions.size(),
                                            " sessions"));
  }
  for (size_t i = 0; i < sessions.size(); ++i) {
    sessions[i]->SetPosition(layer, out->positions[i]);
    Session& s = *sessions[i];
    if (layer >= 0 && layer < s.num_layers()) {
      s.drafts_.resize(s.positions_.size(), 0);
      s.drafts_[layer] = draft ? num_tokens[i] : 0;
    }
  }
  return std::move(out->o);
}

}  // namespace gdn::client
