#include "server/sessions/draft_ops.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gdn {

absl::StatusOr<gdn::v1::CommitDraftResponse> CommitDraftOp(
    StateCache& cache, const gdn::v1::CommitDraftRequest& request) {
  const std::string& id = request.session_id();
  if (!cache.HasSession(id)) {
    return absl::NotFoundError(absl::StrCat("session '", id, "' not found"));
  }
  const int32_t num_layers = cache.config().num_layers;
  std::vector<int32_t> layers;
  for (int i = 0; i < request.layers_size(); ++i) {
    const int32_t layer = request.layers(i);
    if (layer < 0 || layer >= num_layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("layers[", i, "]: layer ", layer, " outside [0, ", num_layers, ")"));
    }
    layers.push_back(layer);
  }
  if (layers.empty()) {
    for (int32_t layer = 0; layer < num_layers; ++layer) {
      if (cache.OpenDraftTokens(id, layer) > 0) layers.push_back(layer);
    }
  }
  // Check every layer before accepting any (all or nothing).
  gdn::v1::CommitDraftResponse response;
  for (int32_t layer : layers) {
    const int32_t tokens = cache.OpenDraftTokens(id, layer);
    absl::StatusOr<int64_t> stored = cache.Position(id, layer);
    if (!stored.ok()) return stored.status();
    if (tokens == 0) {
      if (*stored != request.position()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "session '", id, "' layer ", layer, " has no open draft and is at position ",
            *stored, "; got position ", request.position()));
      }
      continue;  // committed already (a retry)
    }
    const int64_t base = *stored - tokens;
    if (request.position() <= base || request.position() > *stored) {
      return absl::FailedPreconditionError(absl::StrCat(
          "session '", id, "' layer ", layer, " has an uncommitted draft of ", tokens,
          " tokens after position ", base, ": the position must be in [", base + 1, ", ",
          *stored, "] (", base, " + accepted tokens); got position ", request.position()));
    }
    response.add_layers(layer);
    response.add_accepted_tokens(static_cast<int32_t>(request.position() - base));
  }
  for (int32_t layer : response.layers()) {
    if (absl::Status s = cache.AcceptDraft(id, layer, request.position()); !s.ok()) return s;
  }
  return response;
}

int CommitAllDrafts(StateCache& cache, const std::string& id) {
  int committed = 0;
  for (int32_t layer = 0; layer < cache.config().num_layers; ++layer) {
    if (cache.OpenDraftTokens(id, layer) == 0) continue;
    absl::StatusOr<int64_t> stored = cache.Position(id, layer);
    if (stored.ok() && cache.AcceptDraft(id, layer, *stored).ok()) ++committed;
  }
  return committed;
}

}  // namespace gdn
