// The StateCache implementation: sessions (SessionTable) over stored states
// in two tiers (TieredPageStore), with copy-on-write leases, LRU spill and
// restore, optional LRU session eviction and idle expiry.
//
// Beyond what state_cache.h promises:
//   - CloseSession and ForkSession of a session with writes in flight, and
//     ImportLayer / ExportLayer of a leased layer, are FailedPrecondition
//     (the kernel may be writing the page in place); ExpireIdle and eviction
//     skip such sessions.
//   - Commit / Abort of a lease that does not match an in-flight write (done
//     already, or never handed out) change nothing.
//   - Sessions are least recently used by their last AcquireForWrite,
//     Commit, ImportLayer, ExportLayer, CreateSession or ForkSession (parent
//     and child); Describe / Position do not count as use.
// Not thread-safe (see state_cache.h).
#ifndef GDN_STATE_CACHE_PAGED_STATE_CACHE_H_
#define GDN_STATE_CACHE_PAGED_STATE_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "state_cache/session_table.h"
#include "state_cache/state_cache.h"
#include "state_cache/tiered_page_store.h"

namespace gdn {

class PagedStateCache final : public StateCache {
 public:
  PagedStateCache(const StateCacheConfig& config,
                  std::unique_ptr<TieredPageStore> store);

  StatePoolView pool() const override { return store_->pool(); }
  const StateCacheConfig& config() const override { return config_; }

  absl::Status CreateSession(const std::string& id) override;
  absl::Status CloseSession(const std::string& id) override;
  absl::Status ForkSession(const std::string& parent,
                           const std::string& child) override;
  bool HasSession(const std::string& id) const override;
  absl::StatusOr<SessionInfo> DescribeSession(
      const std::string& id) const override;
  std::vector<std::string> ListSessions() const override;
  absl::StatusOr<int64_t> Position(const std::string& session,
                                   int32_t layer) const override;
  LayerFacts Facts(const std::string& session, int32_t layer) const override;

  absl::StatusOr<WriteLease> AcquireForWrite(const std::string& session,
                                             int32_t layer) override;
  void Commit(const WriteLease& lease, int64_t new_position) override;
  void Abort(const WriteLease& lease) override;

  // Drafts: paged_state_cache_drafts.cc.
  absl::StatusOr<WriteLease> AcquireForDraft(const std::string& session, int32_t layer,
                                             int32_t tokens) override;
  absl::Status AcceptDraft(const std::string& session, int32_t layer,
                           int64_t position) override;
  int32_t OpenDraftTokens(const std::string& session, int32_t layer) const override;

  // Kept states: paged_state_cache_kept.cc.
  absl::StatusOr<WriteLease> AcquireForWriteKeeping(const std::string& session, int32_t layer,
                                                    const std::vector<int64_t>& keep) override;
  absl::Status ForkSessionAt(const std::string& parent, const std::string& child,
                             int64_t position) override;
  // Kept states of every session, least recently used first, as
  // (session, layer, position) (tests: the order they would be dropped in).
  std::vector<std::tuple<std::string, int32_t, int64_t>> KeptOldestFirst() const;

  absl::StatusOr<LayerState> ExportLayer(const std::string& session,
                                         int32_t layer) override;
  absl::Status ImportLayer(const std::string& session, int32_t layer,
                           const LayerState& state) override;

  std::vector<std::string> ExpireIdle(absl::Time cutoff) override;
  StateCacheStats Stats() const override;

  // Recounts every reference, pin and page from the sessions and checks the
  // store's books against them (tests; O(sessions * layers + pages)).
  absl::Status CheckInvariants() const;
  // Device page ids of the idle (unpinned) states, least recently used
  // first: the order in which they would be spilled (tests).
  std::vector<int32_t> IdleDevicePagesOldestFirst() const;

 private:
  // The session and entry of (id, layer), or NotFound / OutOfRange.
  absl::Status FindLayer(const std::string& id, int32_t layer,
                         SessionRecord** session, LayerEntry** entry);
  // The in-flight entry `lease` names, or nullptr.
  LayerEntry* FindLease(const WriteLease& lease, SessionRecord** session);
  // Makes sure `wanted` device pages can be taken one after another (see
  // ObtainableDevicePages), evicting least recently used idle sessions other
  // than `requester` when the config allows. On failure nothing changed.
  absl::Status MakeRoom(const SessionRecord& requester, StateId pinned_soon,
                        int wanted, bool first_frees_host,
                        int32_t layer);
  // Releases every reference of a session and forgets it.
  void DropSession(const std::string& id);
  void EndLease(SessionRecord* session, LayerEntry* entry);
  // Draft helpers (paged_state_cache_drafts.cc): the lease's loose pages
  // become the open draft (Commit) or go back (Abort); an open draft's
  // states are released; the error for an open draft in the way of `what`.
  void AdoptLeasedDraft(LayerEntry* entry);
  void ReturnLeasedDraft(LayerEntry* entry);
  void ReleaseDraft(LayerEntry* entry);
  absl::Status OpenDraftError(const std::string& id, int32_t layer, const LayerEntry& entry,
                              absl::string_view what) const;
  // The first layer of `session` with an open draft, or -1.
  int32_t FirstOpenDraft(const SessionRecord& session) const;
  // Kept-state helpers (paged_state_cache_kept.cc): adopt a keeping lease's
  // pages (Commit) or give them back (Abort); release a layer's kept states;
  // drop least recently used kept states until `wanted` device pages can be
  // had (MakeRoom), true when they can.
  void AdoptLeasedKept(const std::string& session, int32_t layer, LayerEntry* entry);
  void ReturnLeasedKept(LayerEntry* entry);
  void ReleaseKept(LayerEntry* entry);
  bool DropKeptForRoom(StateId pinned_soon, int wanted, bool first_frees_host);
  absl::Time Now() const { return config_.clock(); }

  StateCacheConfig config_;
  std::unique_ptr<TieredPageStore> store_;
  SessionTable sessions_;
  uint64_t evictions_ = 0;
  uint64_t cow_copies_ = 0;
  uint64_t expired_ = 0;
  int64_t draft_pages_ = 0;  // states held by open drafts
  uint64_t draft_tokens_ = 0;
  uint64_t accepted_tokens_ = 0;
  // Kept states by last use: stamp -> (session, layer, position).
  struct KeptKey {
    std::string session;
    int32_t layer = 0;
    int64_t position = 0;
  };
  std::map<uint64_t, KeptKey> kept_order_;
  uint64_t next_kept_stamp_ = 1;
  uint64_t kept_dropped_ = 0;
};

}  // namespace gdn

#endif  // GDN_STATE_CACHE_PAGED_STATE_CACHE_H_
