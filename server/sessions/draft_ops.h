// Speculative-draft commands over the StateCache (StateCache::AcceptDraft),
// run on the engine thread: the CommitDraft RPC, and the drain's
// commit-everything before a session is written to --snapshot_dir.
#ifndef GDN_SERVER_SESSIONS_DRAFT_OPS_H_
#define GDN_SERVER_SESSIONS_DRAFT_OPS_H_

#include <string>

#include "absl/status/statusor.h"
#include "gdn/v1/gdn.pb.h"
#include "state_cache/state_cache.h"

namespace gdn {

// Accepts request.position - p tokens of the open draft of each selected
// layer (gdn.proto CommitDraftRequest), all or nothing: NotFound for an
// unknown session, InvalidArgument for a layer outside the model,
// FailedPrecondition naming the layer and its allowed range for a position
// outside a draft (or a named layer without a draft that is not already at
// the position). Nothing changes on an error.
absl::StatusOr<gdn::v1::CommitDraftResponse> CommitDraftOp(
    StateCache& cache, const gdn::v1::CommitDraftRequest& request);

// Commits every open draft of `id` in full (each layer stays at its stored
// position, after all of its draft tokens); returns how many there were.
int CommitAllDrafts(StateCache& cache, const std::string& id);

}  // namespace gdn

#endif  // GDN_SERVER_SESSIONS_DRAFT_OPS_H_
