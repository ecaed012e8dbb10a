// Kept states (prefix reuse) in the paged state cache (state_cache.h): a
// keeping write leases one loose device page per kept position besides its
// write page; the kernel writes the state at that position into it
// (GdnParams' checkpoint slots) and Commit adds it to the layer's kept
// states. ForkSessionAt starts a child from them (shared, copy-on-write).
//
// Every kept state is in kept_order_ by last use (adoption or a fork from
// it). MakeRoom drops the least recently used ones whose pages that frees
// before it fails a write or evicts a session; one shared with a fork (or
// pinned by a fork's write) would free nothing and stays. A loose page of a
// write in flight is no kept state yet: nothing drops it.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "state_cache/paged_state_cache.h"

namespace gdn {

absl::StatusOr<WriteLease> PagedStateCache::AcquireForWriteKeeping(
    const std::string& id, int32_t layer, const std::vector<int64_t>& keep) {
  absl::StatusOr<WriteLease> lease = AcquireForWrite(id, layer);
  if (!lease.ok() || keep.empty()) return lease;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i] <= lease->position || (i > 0 && keep[i] <= keep[i - 1])) {
      Abort(*lease);
      return absl::InvalidArgumentError(absl::StrCat(
          "kept positions must ascend after the stored position ", lease->position,
          "; got ", keep[i]));
    }
  }
  SessionRecord* session = nullptr;
  LayerEntry* entry = nullptr;
  absl::Status found = FindLayer(id, layer, &session, &entry);
  if (!found.ok()) return found;  // cannot happen: the lease was just taken
  const int wanted = static_cast<int>(keep.size());
  absl::Status room = MakeRoom(*session, kNoState, wanted, false, layer);
  if (!room.ok()) {
    Abort(*lease);
    return room;
  }
  for (int i = 0; i < wanted; ++i) {
    absl::StatusOr<int32_t> page = store_->TakeDevicePage();
    if (!page.ok()) {
      for (int32_t taken : lease->keep_pages) store_->ReturnDevicePage(taken);
      lease->keep_pages.clear();
      Abort(*lease);
      return page.status();
    }
    lease->keep_pages.push_back(*page);
  }
  lease->keep_positions = keep;
  entry->lease_keep_positions = keep;
  entry->lease_keep_pages = lease->keep_pages;
  return lease;
}

void PagedStateCache::AdoptLeasedKept(const std::string& session, int32_t layer,
                                      LayerEntry* entry) {
  for (size_t i = 0; i < entry->lease_keep_pages.size(); ++i) {
    LayerEntry::Kept kept;
    kept.position = entry->lease_keep_positions[i];
    kept.state = store_->AdoptDevicePage(entry->lease_keep_pages[i]);
    kept.stamp = next_kept_stamp_++;
    kept_order_[kept.stamp] = {session, layer, kept.position};
    // Positions only grow, so the new ones go after the ones kept before.
    entry->kept.push_back(kept);
  }
  entry->lease_keep_pages.clear();
  entry->lease_keep_positions.clear();
}

void PagedStateCache::ReturnLeasedKept(LayerEntry* entry) {
  for (int32_t page : entry->lease_keep_pages) store_->ReturnDevicePage(page);
  entry->lease_keep_pages.clear();
  entry->lease_keep_positions.clear();
}

void PagedStateCache::ReleaseKept(LayerEntry* entry) {
  for (const LayerEntry::Kept& kept : entry->kept) {
    kept_order_.erase(kept.stamp);
    store_->Release(kept.state);
  }
  entry->kept.clear();
}

bool PagedStateCache::DropKeptForRoom(StateId pinned_soon, int wanted, bool first_frees_host) {
  for (auto it = kept_order_.begin(); it != kept_order_.end();) {
    if (ObtainableDevicePages(store_->Room(pinned_soon), wanted, first_frees_host) >= wanted) {
      return true;
    }
    SessionRecord* session = sessions_.Find(it->second.session);
    LayerEntry& entry = session->layers[it->second.layer];
    auto kept = std::find_if(entry.kept.begin(), entry.kept.end(),
                             [&](const LayerEntry::Kept& k) { return k.stamp == it->first; });
    if (store_->refs(kept->state) > 1 || store_->pins(kept->state) > 0) {
      ++it;  // held by a fork too: dropping it frees nothing
      continue;
    }
    store_->Release(kept->state);
    entry.kept.erase(kept);
    it = kept_order_.erase(it);
    ++kept_dropped_;
  }
  return ObtainableDevicePages(store_->Room(pinned_soon), wanted, first_frees_host) >= wanted;
}

absl::Status PagedStateCache::ForkSessionAt(const std::string& parent, const std::string& child,
                                            int64_t position) {
  if (child.empty()) return absl::InvalidArgumentError("empty session id");
  SessionRecord* source = sessions_.Find(parent);
  if (source == nullptr) return absl::NotFoundError(absl::StrCat("no session '", parent, "'"));
  if (sessions_.Find(child) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("session '", child, "' exists"));
  }
  if (source->leases_in_flight > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot fork session '", parent, "': ", source->leases_in_flight, " write(s) in flight"));
  }
  // Per layer the state at `position`: kept, or current (no open draft).
  std::vector<StateId> states(config_.num_layers, kNoState);
  std::vector<LayerEntry::Kept*> used;
  bool complete = true;
  for (int32_t layer = 0; layer < config_.num_layers && complete; ++layer) {
    LayerEntry& entry = source->layers[layer];
    if (entry.position == position && entry.draft_tokens == 0) {
      states[layer] = entry.state;
      continue;
    }
    auto kept = std::find_if(entry.kept.begin(), entry.kept.end(),
                             [&](const LayerEntry::Kept& k) { return k.position == position; });
    if (kept == entry.kept.end()) {
      complete = false;
    } else {
      states[layer] = kept->state;
      used.push_back(&*kept);
    }
  }
  if (!complete) {
    // The positions every layer could fork at.
    std::vector<int64_t> common;
    for (int32_t layer = 0; layer < config_.num_layers; ++layer) {
      const LayerEntry& entry = source->layers[layer];
      std::vector<int64_t> here;
      for (const LayerEntry::Kept& k : entry.kept) here.push_back(k.position);
      if (entry.draft_tokens == 0) here.push_back(entry.position);
      std::sort(here.begin(), here.end());
      if (layer == 0) {
        common = here;
      } else {
        std::vector<int64_t> both;
        std::set_intersection(common.begin(), common.end(), here.begin(), here.end(),
                              std::back_inserter(both));
        common = std::move(both);
      }
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "session '", parent, "' cannot be forked at position ", position,
        ": not every layer has a kept state there; positions available on every layer: [",
        absl::StrJoin(common, ", "), "]"));
  }
  const absl::Time now = Now();
  SessionRecord* copy = sessions_.Insert(child, config_.num_layers, now);
  for (int32_t layer = 0; layer < config_.num_layers; ++layer) {
    LayerEntry& to = copy->layers[layer];
    to.position = position;
    to.state = states[layer];
    if (to.state != kNoState) store_->AddRef(to.state);  // shared, no copy
  }
  for (LayerEntry::Kept* kept : used) {  // a use: most recently used now
    KeptKey key = std::move(kept_order_[kept->stamp]);
    kept_order_.erase(kept->stamp);
    kept->stamp = next_kept_stamp_++;
    kept_order_[kept->stamp] = std::move(key);
  }
  sessions_.Touch(source, now);
  return absl::OkStatus();
}

std::vector<std::tuple<std::string, int32_t, int64_t>> PagedStateCache::KeptOldestFirst() const {
  std::vector<std::tuple<std::string, int32_t, int64_t>> out;
  for (const auto& [stamp, key] : kept_order_) out.emplace_back(key.session, key.layer, key.position);
  return out;
}

}  // namespace gdn
