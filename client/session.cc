#include "client/session.h"

#include <algorithm>
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
  for (const v1::LayerStateInfo& l : described->layers()) {
    if (l.layer() >= 0) positions_[l.layer()] = l.position();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Session::Forward(int layer, int32_t num_tokens,
                                                    const ForwardInputs& inputs) {
  return ForwardSessions(client_, layer, {this}, {num_tokens}, inputs);
}

absl::StatusOr<Session> Session::Fork(const std::string& child_id) const {
  absl::StatusOr<std::string> child =
      client_->ForkSession(id_, child_id.empty() ? NewSessionId(RoutingKey(id_)) : child_id);
  if (!child.ok()) return child.status();
  return Session(client_, *std::move(child), positions_);
}

absl::Status Session::Close() { return client_->CloseSession(id_); }

absl::StatusOr<std::vector<float>> ForwardSessions(
    GdnClient* client, int layer, const std::vector<Session*>& sessions,
    const std::vector<int32_t>& num_tokens, const ForwardInputs& inputs) {
  if (sessions.size() != num_tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        sessions.size(), " sessions but ", num_tokens.size(), " token counts"));
  }
  std::vector<SequenceTokens> specs;
  specs.reserve(sessions.size());
  for (size_t i = 0; i < sessions.size(); ++i) {
    specs.push_back(sessions[i]->Next(layer, num_tokens[i]));
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
  }
  return std::move(out->o);
}

}  // namespace gdn::client
