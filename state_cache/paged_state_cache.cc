#include "state_cache/paged_state_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "state_cache/eviction_plan.h"
#include "state_cache/invariant.h"

namespace gdn {
namespace {

absl::Status SessionNotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
}

absl::Status WritesInFlight(const SessionRecord& session,
                            absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot ", what, " session '", session.id, "': ",
                   session.leases_in_flight, " write(s) in flight"));
}

}  // namespace

PagedStateCache::PagedStateCache(const StateCacheConfig& config,
                                 std::unique_ptr<TieredPageStore> store)
    : config_(config), store_(std::move(store)) {}

absl::Status PagedStateCache::FindLayer(const std::string& id, int32_t layer,
                                        SessionRecord** session,
                                        LayerEntry** entry) {
  *session = sessions_.Find(id);
  if (*session == nullptr) return SessionNotFound(id);
  if (layer < 0 || layer >= config_.num_layers) {
    return absl::OutOfRangeError(absl::StrCat(
        "layer ", layer, " outside [0, ", config_.num_layers, ")"));
  }
  *entry = &(*session)->layers[layer];
  return absl::OkStatus();
}

// --- Sessions.

absl::Status PagedStateCache::CreateSession(const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("empty session id");
  if (sessions_.Find(id) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("session '", id, "' exists"));
  }
  sessions_.Insert(id, config_.num_layers, Now());
  return absl::OkStatus();
}

void PagedStateCache::DropSession(const std::string& id) {
  SessionRecord* session = sessions_.Find(id);
  GDN_CACHE_INVARIANT(session != nullptr && session->leases_in_flight == 0);
  for (LayerEntry& entry : session->layers) {
    ReleaseDraft(&entry);
    ReleaseKept(&entry);
    if (entry.state != kNoState) store_->Release(entry.state);
  }
  sessions_.Erase(id);
}

absl::Status PagedStateCache::CloseSession(const std::string& id) {
  const SessionRecord* session = sessions_.Find(id);
  if (session == nullptr) return SessionNotFound(id);
  if (session->leases_in_flight > 0) return WritesInFlight(*session, "close");
  DropSession(id);
  return absl::OkStatus();
}

absl::Status PagedStateCache::ForkSession(const std::string& parent,
                                          const std::string& child) {
  if (child.empty()) return absl::InvalidArgumentError("empty session id");
  SessionRecord* source = sessions_.Find(parent);
  if (source == nullptr) return SessionNotFound(parent);
  if (sessions_.Find(child) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("session '", child, "' exists"));
  }
  // An in-place write would change the page under the child.
  if (source->leases_in_flight > 0) return WritesInFlight(*source, "fork");
  if (const int32_t layer = FirstOpenDraft(*source); layer >= 0) {
    return OpenDraftError(parent, layer, source->layers[layer], "fork");
  }
  const absl::Time now = Now();
  SessionRecord* copy = sessions_.Insert(child, config_.num_layers, now);
  for (int32_t layer = 0; layer < config_.num_layers; ++layer) {
    const LayerEntry& from = source->layers[layer];
    LayerEntry& to = copy->layers[layer];
    to.position = from.position;
    to.state = from.state;
    if (to.state != kNoState) store_->AddRef(to.state);  // shared, no copy
  }
  sessions_.Touch(source, now);
  return absl::OkStatus();
}

bool PagedStateCache::HasSession(const std::string& id) const {
  return sessions_.Find(id) != nullptr;
}

absl::StatusOr<SessionInfo> PagedStateCache::DescribeSession(
    const std::string& id) const {
  const SessionRecord* session = sessions_.Find(id);
  if (session == nullptr) return SessionNotFound(id);
  SessionInfo info;
  info.id = id;
  info.last_access = session->last_access;
  info.layers.resize(session->layers.size());
  for (size_t layer = 0; layer < session->layers.size(); ++layer) {
    const LayerEntry& entry = session->layers[layer];
    LayerStateInfo& out = info.layers[layer];
    out.position = entry.position;
    out.has_state = entry.state != kNoState;
    out.draft_tokens = entry.draft_tokens;
    for (const LayerEntry::Kept& kept : entry.kept) out.kept_positions.push_back(kept.position);
    if (out.has_state) {
      out.tier = store_->tier(entry.state);
      out.shared_with = store_->refs(entry.state) - 1;
      info.bytes += store_->page_bytes();
    }
  }
  return info;
}

std::vector<std::string> PagedStateCache::ListSessions() const {
  return sessions_.Ids();
}

StateCache::LayerFacts PagedStateCache::Facts(const std::string& id, int32_t layer) const {
  LayerFacts facts;
  const SessionRecord* session = sessions_.Find(id);
  facts.session_exists = session != nullptr;
  if (session != nullptr && layer >= 0 && layer < config_.num_layers) {
    facts.position = session->layers[layer].position;
    facts.open_draft_tokens = session->layers[layer].draft_tokens;
  }
  return facts;
}

absl::StatusOr<int64_t> PagedStateCache::Position(const std::string& id,
                                                  int32_t layer) const {
  const SessionRecord* session = sessions_.Find(id);
  if (session == nullptr) return SessionNotFound(id);
  if (layer < 0 || layer >= config_.num_layers) {
    return absl::OutOfRangeError(absl::StrCat(
        "layer ", layer, " outside [0, ", config_.num_layers, ")"));
  }
  return session->layers[layer].position;
}

// --- Room.

absl::Status PagedStateCache::MakeRoom(const SessionRecord& requester,
                                       StateId pinned_soon, int wanted,
                                       bool first_frees_host, int32_t layer) {
  const TierRoom room = store_->Room(pinned_soon);
  if (ObtainableDevicePages(room, wanted, first_frees_host) >= wanted) {
    return absl::OkStatus();
  }
  // Kept states go first (least recently used), before failing or evicting.
  if (DropKeptForRoom(pinned_soon, wanted, first_frees_host)) return absl::OkStatus();
  if (config_.evict_lru_sessions_when_full) {
    std::optional<std::vector<std::string>> victims = PlanEviction(
        sessions_, *store_, requester.id, room, wanted, first_frees_host);
    if (victims) {
      for (const std::string& id : *victims) DropSession(id);
      evictions_ += victims->size();
      return absl::OkStatus();
    }
  }
  const TierStats device = store_->DeviceStats();
  const TierStats host = store_->HostStats();
  return absl::ResourceExhaustedError(absl::StrCat(
      "state cache full: session '", requester.id, "' layer ", layer,
      " needs ", wanted, " device page(s); device ", device.pages_used, "/",
      device.pages_total, " pages used (", device.pages_pinned,
      " pinned by writes in flight), host ", host.pages_used, "/",
      host.pages_total, " used; ",
      config_.evict_lru_sessions_when_full
          ? "evicting every idle session would not be enough"
          : "eviction disabled"));
}

// --- Writes.

absl::StatusOr<WriteLease> PagedStateCache::AcquireForWrite(
    const std::string& id, int32_t layer) {
  SessionRecord* session = nullptr;
  LayerEntry* entry = nullptr;
  absl::Status found = FindLayer(id, layer, &session, &entry);
  if (!found.ok()) return found;
  if (entry->leased) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session '", id, "' layer ", layer, " has a write in flight"));
  }
  if (entry->draft_tokens > 0) return OpenDraftError(id, layer, *entry, "write");
  const StateId state = entry->state;
  const bool on_host =
      state != kNoState && store_->tier(state) == Tier::kHost;
  const bool shared = state != kNoState && store_->refs(state) > 1;
  // Device pages taken one after another: the restored state (host), then
  // the page the kernel writes (new state, or leaving a shared page).
  const int wanted = (on_host ? 1 : 0) + (state == kNoState || shared ? 1 : 0);
  absl::Status room = MakeRoom(*session, state, wanted, on_host, layer);
  if (!room.ok()) return room;

  if (on_host) {
    absl::Status restored = store_->Restore(state);
    if (!restored.ok()) return restored;
  }
  if (state != kNoState) store_->Pin(state);  // never spilled while read
  // Eviction may have dropped the other holders of a shared state.
  const bool copy_on_write = state != kNoState && store_->refs(state) > 1;
  int32_t write_page;
  if (state == kNoState || copy_on_write) {
    absl::StatusOr<int32_t> page = store_->TakeDevicePage();
    if (!page.ok()) {
      if (state != kNoState) store_->Unpin(state);
      return page.status();
    }
    write_page = *page;
  } else {
    write_page = store_->page(state);  // private: in place
  }

  entry->leased = true;
  entry->lease_write_page = write_page;
  ++session->leases_in_flight;
  sessions_.Touch(session, Now());

  WriteLease lease;
  lease.session = id;
  lease.layer = layer;
  lease.position = entry->position;
  lease.read_page = state == kNoState ? kZeroStatePage : store_->page(state);
  lease.write_page = write_page;
  return lease;
}

LayerEntry* PagedStateCache::FindLease(const WriteLease& lease,
                                       SessionRecord** session) {
  LayerEntry* entry = nullptr;
  if (!FindLayer(lease.session, lease.layer, session, &entry).ok()) {
    return nullptr;
  }
  if (!entry->leased || entry->lease_write_page != lease.write_page) {
    return nullptr;
  }
  const int32_t read_page =
      entry->state == kNoState ? kZeroStatePage : store_->page(entry->state);
  return read_page == lease.read_page ? entry : nullptr;
}

void PagedStateCache::EndLease(SessionRecord* session, LayerEntry* entry) {
  entry->leased = false;
  entry->lease_write_page = kZeroStatePage;
  --session->leases_in_flight;
}

void PagedStateCache::Commit(const WriteLease& lease, int64_t new_position) {
  SessionRecord* session = nullptr;
  LayerEntry* entry = FindLease(lease, &session);
  if (entry == nullptr) return;
  const StateId old_state = entry->state;
  if (old_state != kNoState &&
      store_->page(old_state) == entry->lease_write_page) {
    store_->Unpin(old_state);  // written in place
  } else {
    entry->state = store_->AdoptDevicePage(entry->lease_write_page);
    if (old_state != kNoState) {
      store_->Unpin(old_state);
      store_->Release(old_state);  // the other holders keep it
      ++cow_copies_;
    }
  }
  entry->position = new_position;
  AdoptLeasedDraft(entry);
  AdoptLeasedKept(lease.session, lease.layer, entry);
  EndLease(session, entry);
  sessions_.Touch(session, Now());
}

void PagedStateCache::Abort(const WriteLease& lease) {
  SessionRecord* session = nullptr;
  LayerEntry* entry = FindLease(lease, &session);
  if (entry == nullptr) return;
  const StateId state = entry->state;
  const bool in_place =
      state != kNoState && store_->page(state) == entry->lease_write_page;
  if (!in_place) store_->ReturnDevicePage(entry->lease_write_page);
  if (state != kNoState) store_->Unpin(state);
  ReturnLeasedDraft(entry);
  ReturnLeasedKept(entry);
  EndLease(session, entry);
}

// --- Export / import.

absl::StatusOr<StateCache::LayerState> PagedStateCache::ExportLayer(
    const std::string& id, int32_t layer) {
  SessionRecord* session = nullptr;
  LayerEntry* entry = nullptr;
  absl::Status found = FindLayer(id, layer, &session, &entry);
  if (!found.ok()) return found;
  if (entry->leased) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session '", id, "' layer ", layer, " has a write in flight"));
  }
  if (entry->draft_tokens > 0) return OpenDraftError(id, layer, *entry, "export");
  LayerState out;
  out.position = entry->position;
  if (entry->state != kNoState) {
    // A host state is read where it is: no restore for a read.
    absl::Status read = store_->ReadState(entry->state, &out.bytes);
    if (!read.ok()) return read;
  }
  sessions_.Touch(session, Now());
  return out;
}

absl::Status PagedStateCache::ImportLayer(const std::string& id,
                                          int32_t layer,
                                          const LayerState& state) {
  SessionRecord* session = nullptr;
  LayerEntry* entry = nullptr;
  absl::Status found = FindLayer(id, layer, &session, &entry);
  if (!found.ok()) return found;
  const size_t page_bytes = static_cast<size_t>(store_->page_bytes());
  if (!state.bytes.empty() && state.bytes.size() != page_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("state of ", state.bytes.size(), " bytes, pages hold ",
                     page_bytes, " (or 0 for the zero state)"));
  }
  if (state.position < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("negative position ", state.position));
  }
  if (entry->leased) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session '", id, "' layer ", layer, " has a write in flight"));
  }
  ReleaseDraft(entry);  // the imported state replaces it
  ReleaseKept(entry);
  const StateId old_state = entry->state;
  if (state.bytes.empty()) {
    if (old_state != kNoState) store_->Release(old_state);
    entry->state = kNoState;
  } else if (old_state != kNoState && store_->refs(old_state) == 1) {
    // Private: overwritten where it lives, device or host.
    absl::Status written = store_->WriteState(old_state, state.bytes);
    if (!written.ok()) return written;
    store_->Touch(old_state);
  } else {
    // None or shared: a new page, the other holders keep theirs.
    absl::Status room = MakeRoom(*session, kNoState, 1, false, layer);
    if (!room.ok()) return room;
    absl::StatusOr<int32_t> page = store_->TakeDevicePage();
    if (!page.ok()) return page.status();
    absl::Status written = store_->WriteDevicePage(*page, state.bytes);
    if (!written.ok()) {
      store_->ReturnDevicePage(*page);
      return written;
    }
    entry->state = store_->AdoptDevicePage(*page);
    if (old_state != kNoState) store_->Release(old_state);
  }
  entry->position = state.position;
  sessions_.Touch(session, Now());
  return absl::OkStatus();
}

// --- Expiry and observation.

std::vector<std::string> PagedStateCache::ExpireIdle(absl::Time cutoff) {
  std::vector<std::string> closed;
  for (const std::string& id : sessions_.OldestFirst()) {
    const SessionRecord* session = sessions_.Find(id);
    if (session->last_access >= cutoff || session->leases_in_flight > 0) {
      continue;
    }
    DropSession(id);
    closed.push_back(id);
  }
  expired_ += closed.size();
  return closed;
}

StateCacheStats PagedStateCache::Stats() const {
  StateCacheStats stats;
  stats.device = store_->DeviceStats();
  stats.host = store_->HostStats();
  stats.page_bytes = store_->page_bytes();
  stats.sessions = sessions_.size();
  stats.spills = store_->spills();
  stats.restores = store_->restores();
  stats.evictions = evictions_;
  stats.cow_copies = cow_copies_;
  stats.expired = expired_;
  stats.draft_pages = draft_pages_;
  stats.draft_tokens = draft_tokens_;
  stats.accepted_tokens = accepted_tokens_;
  stats.kept_states = static_cast<int64_t>(kept_order_.size());
  stats.kept_dropped = kept_dropped_;
  return stats;
}

std::vector<int32_t> PagedStateCache::IdleDevicePagesOldestFirst() const {
  std::vector<int32_t> pages;
  for (StateId state : store_->IdleDeviceStatesOldestFirst()) {
    pages.push_back(store_->page(state));
  }
  return pages;
}

absl::Status PagedStateCache::CheckInvariants() const {
  std::vector<int32_t> refs(store_->max_states(), 0);
  std::vector<int32_t> pins(store_->max_states(), 0);
  int32_t loose = 0;
  size_t kept_states = 0;
  for (const auto& [id, session] : sessions_.sessions()) {
    int32_t leased = 0;
    for (const LayerEntry& entry : session.layers) {
      if (entry.state != kNoState) {
        if (entry.state < 0 || entry.state >= store_->max_states() ||
            !store_->IsLive(entry.state)) {
          return absl::InternalError(absl::StrCat(
              "session '", id, "' references dead state ", entry.state));
        }
        ++refs[entry.state];
      }
      for (int32_t j = 0; j + 1 < entry.draft_tokens; ++j) {
        const StateId draft = entry.draft_states[j];
        if (draft < 0 || draft >= store_->max_states() || !store_->IsLive(draft)) {
          return absl::InternalError(absl::StrCat(
              "session '", id, "' draft references dead state ", draft));
        }
        ++refs[draft];
      }
      for (const LayerEntry::Kept& kept : entry.kept) {
        if (kept.state < 0 || kept.state >= store_->max_states() || !store_->IsLive(kept.state)) {
          return absl::InternalError(absl::StrCat(
              "session '", id, "' kept state references dead state ", kept.state));
        }
        ++refs[kept.state];
        ++kept_states;
      }
      if (!entry.leased) continue;
      ++leased;
      loose += entry.lease_draft_tokens > 0 ? entry.lease_draft_tokens - 1 : 0;
      loose += static_cast<int32_t>(entry.lease_keep_pages.size());
      if (entry.state != kNoState) ++pins[entry.state];
      if (entry.state == kNoState ||
          store_->page(entry.state) != entry.lease_write_page) {
        ++loose;
      }
    }
    if (leased != session.leases_in_flight) {
      return absl::InternalError(absl::StrCat(
          "session '", id, "' counts ", session.leases_in_flight,
          " leases, its layers ", leased));
    }
  }
  if (kept_states != kept_order_.size()) {
    return absl::InternalError(absl::StrCat("layers hold ", kept_states, " kept states, the ",
                                            "recency order ", kept_order_.size()));
  }
  return store_->CheckConsistency(refs, pins, loose);
}

}  // namespace gdn
