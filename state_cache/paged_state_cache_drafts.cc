// Speculative drafts in the paged state cache (state_cache.h): a draft write
// of T tokens leases T - 1 loose device pages besides its write page; the
// kernel writes the state after each draft token but the last into them
// (kPerTokenStates), and Commit adopts them as the layer's open draft. The
// next write's position picks the accepted prefix (AcceptDraft), so no
// rejected token is ever undone and no accepted one recomputed.
//
// Pages of an open draft are ordinary stored states (one reference each,
// idle, in the LRU order: spilled to the host tier like any other), counted
// in draft_pages_ until accepted or dropped.
#include <utility>

#include "absl/strings/str_cat.h"
#include "state_cache/paged_state_cache.h"

namespace gdn {

int32_t PagedStateCache::FirstOpenDraft(const SessionRecord& session) const {
  for (size_t layer = 0; layer < session.layers.size(); ++layer) {
    if (session.layers[layer].draft_tokens > 0) return static_cast<int32_t>(layer);
  }
  return -1;
}

absl::Status PagedStateCache::OpenDraftError(const std::string& id, int32_t layer,
                                             const LayerEntry& entry,
                                             absl::string_view what) const {
  const int64_t base = entry.position - entry.draft_tokens;
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot ", what, " session '", id, "' layer ", layer, ": it has an uncommitted draft of ",
      entry.draft_tokens, " tokens; commit it first (a Forward call or CommitDraft at a position "
      "in [", base + 1, ", ", entry.position, "])"));
}

absl::StatusOr<WriteLease> PagedStateCache::AcquireForDraft(const std::string& id, int32_t layer,
                                                            int32_t tokens) {
  if (tokens < 2 || tokens > kMaxDecodeTokens) {
    return absl::InvalidArgumentError(absl::StrCat("a draft has 2..", kMaxDecodeTokens,
                                                   " tokens, got ", tokens));
  }
  absl::StatusOr<WriteLease> lease = AcquireForWrite(id, layer);
  if (!lease.ok()) return lease;
  SessionRecord* session = nullptr;
  LayerEntry* entry = nullptr;
  absl::Status found = FindLayer(id, layer, &session, &entry);
  if (!found.ok()) return found;  // cannot happen: the lease was just taken
  // The state the lease reads is pinned now, so MakeRoom counts it as staying.
  absl::Status room = MakeRoom(*session, kNoState, tokens - 1, false, layer);
  if (!room.ok()) {
    Abort(*lease);
    return room;
  }
  for (int32_t j = 0; j < tokens - 1; ++j) {
    absl::StatusOr<int32_t> page = store_->TakeDevicePage();
    if (!page.ok()) {
      for (int32_t i = 0; i < j; ++i) store_->ReturnDevicePage(lease->draft_pages[i]);
      Abort(*lease);
      return page.status();
    }
    lease->draft_pages[j] = *page;
  }
  lease->draft_tokens = tokens;
  entry->lease_draft_tokens = tokens;
  entry->lease_draft_pages = lease->draft_pages;
  return lease;
}

void PagedStateCache::AdoptLeasedDraft(LayerEntry* entry) {
  if (entry->lease_draft_tokens == 0) return;
  entry->draft_tokens = entry->lease_draft_tokens;
  for (int32_t j = 0; j + 1 < entry->draft_tokens; ++j) {
    entry->draft_states[j] = store_->AdoptDevicePage(entry->lease_draft_pages[j]);
  }
  draft_pages_ += entry->draft_tokens - 1;
  draft_tokens_ += static_cast<uint64_t>(entry->draft_tokens);
  entry->lease_draft_tokens = 0;
}

void PagedStateCache::ReturnLeasedDraft(LayerEntry* entry) {
  for (int32_t j = 0; j + 1 < entry->lease_draft_tokens; ++j) {
    store_->ReturnDevicePage(entry->lease_draft_pages[j]);
  }
  entry->lease_draft_tokens = 0;
}

void PagedStateCache::ReleaseDraft(LayerEntry* entry) {
  for (int32_t j = 0; j + 1 < entry->draft_tokens; ++j) store_->Release(entry->draft_states[j]);
  draft_pages_ -= entry->draft_tokens > 0 ? entry->draft_tokens - 1 : 0;
  entry->draft_tokens = 0;
}

absl::Status PagedStateCache::AcceptDraft(const std::string& id, int32_t layer,
                                          int64_t position) {
  SessionRecord* session = nullptr;
  LayerEntry* entry = nullptr;
  absl::Status found = FindLayer(id, layer, &session, &entry);
  if (!found.ok()) return found;
  if (entry->draft_tokens == 0) {
    return absl::FailedPreconditionError(absl::StrCat("session '", id, "' layer ", layer,
                                                      " has no open draft (at position ",
                                                      entry->position, ")"));
  }
  const int64_t base = entry->position - entry->draft_tokens;
  if (position <= base || position > entry->position) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session '", id, "' layer ", layer, " has an uncommitted draft of ", entry->draft_tokens,
        " tokens after position ", base, ": the next position must be in [", base + 1, ", ",
        entry->position, "] (", base, " + accepted tokens); got position ", position));
  }
  const int32_t accepted = static_cast<int32_t>(position - base);
  if (accepted < entry->draft_tokens) {
    // The state after token `accepted` becomes current; the draft's final
    // state (entry->state) and the other per-token states are freed.
    const StateId kept = entry->draft_states[accepted - 1];
    entry->draft_states[accepted - 1] = entry->state;
    entry->state = kept;
  }
  ReleaseDraft(entry);  // now holds every state but the kept one
  entry->position = position;
  accepted_tokens_ += static_cast<uint64_t>(accepted);
  sessions_.Touch(session, Now());
  return absl::OkStatus();
}

int32_t PagedStateCache::OpenDraftTokens(const std::string& id, int32_t layer) const {
  const SessionRecord* session = sessions_.Find(id);
  if (session == nullptr || layer < 0 || layer >= config_.num_layers) return 0;
  return session->layers[layer].draft_tokens;
}

}  // namespace gdn
