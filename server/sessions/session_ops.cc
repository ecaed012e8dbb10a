#include "server/sessions/session_ops.h"

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gdn {

std::string GenerateSessionId(const StateCache& cache) {
  static absl::BitGen* gen = new absl::BitGen();  // engine thread only
  while (true) {
    std::string id = absl::StrFormat("s-%016x%016x", absl::Uniform<uint64_t>(*gen),
                                     absl::Uniform<uint64_t>(*gen));
    if (!cache.HasSession(id)) return id;
  }
}

absl::StatusOr<std::string> CreateSessionOp(StateCache& cache,
                                            const std::string& requested_id) {
  const std::string id =
      requested_id.empty() ? GenerateSessionId(cache) : requested_id;
  if (absl::Status s = cache.CreateSession(id); !s.ok()) return s;
  return id;
}

absl::StatusOr<std::string> ForkSessionOp(StateCache& cache,
                                          const std::string& parent,
                                          const std::string& child,
                                          std::optional<int64_t> at_position) {
  const std::string id = child.empty() ? GenerateSessionId(cache) : child;
  absl::Status forked = at_position ? cache.ForkSessionAt(parent, id, *at_position)
                                    : cache.ForkSession(parent, id);
  if (!forked.ok()) return forked;
  return id;
}

absl::StatusOr<gdn::v1::DescribeSessionResponse> DescribeSessionOp(
    const StateCache& cache, const std::string& id, absl::Time now) {
  absl::StatusOr<SessionInfo> info = cache.DescribeSession(id);
  if (!info.ok()) return info.status();
  gdn::v1::DescribeSessionResponse out;
  out.set_session_id(info->id);
  for (size_t layer = 0; layer < info->layers.size(); ++layer) {
    const LayerStateInfo& l = info->layers[layer];
    gdn::v1::LayerStateInfo* p = out.add_layers();
    p->set_layer(static_cast<int32_t>(layer));
    p->set_position(l.position);
    p->set_has_state(l.has_state);
    p->set_tier(l.tier == Tier::kDevice ? "device" : "host");
    p->set_shared_with(l.shared_with);
    p->set_draft_tokens(l.draft_tokens);
    for (int64_t position : l.kept_positions) p->add_kept_positions(position);
  }
  out.set_state_bytes(info->bytes);
  out.set_idle_seconds(
      std::max(0.0, absl::ToDoubleSeconds(now - info->last_access)));
  return out;
}

absl::StatusOr<SessionStates> ExportSessionOp(StateCache& cache,
                                              const std::string& id) {
  if (!cache.HasSession(id)) {
    return absl::NotFoundError(absl::StrCat("session '", id, "' not found"));
  }
  SessionStates states;
  states.session_id = id;
  const int layers = cache.config().num_layers;
  for (int layer = 0; layer < layers; ++layer) {
    absl::StatusOr<StateCache::LayerState> state = cache.ExportLayer(id, layer);
    if (!state.ok()) return state.status();
    states.layers.push_back(std::move(*state));
  }
  states.layers_received = layers;
  return states;
}

absl::Status ImportSessionOp(StateCache& cache, const SessionStates& states) {
  if (absl::Status s = cache.CreateSession(states.session_id); !s.ok()) {
    return s;
  }
  for (size_t layer = 0; layer < states.layers.size(); ++layer) {
    const StateCache::LayerState& state = states.layers[layer];
    if (state.bytes.empty() && state.position == 0) continue;  // zero state
    absl::Status s =
        cache.ImportLayer(states.session_id, static_cast<int32_t>(layer), state);
    if (!s.ok()) {
      cache.CloseSession(states.session_id).IgnoreError();  // no half session
      return absl::Status(s.code(), absl::StrCat("layer ", layer, ": ",
                                                 s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace gdn
