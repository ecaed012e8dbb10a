// The sessions of the state cache: per session, per layer, the stored state
// it references (a StateId of the TieredPageStore, or none) and its position,
// plus the recency order of sessions (for expiry and LRU eviction).
//
// Pure bookkeeping (no pages, no backend): the cache keeps references and
// pins consistent with the store.
#ifndef GDN_STATE_CACHE_SESSION_TABLE_H_
#define GDN_STATE_CACHE_SESSION_TABLE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/time/time.h"
#include "kernels/gdn_params.h"
#include "state_cache/tiered_page_store.h"

namespace gdn {

// One (session, layer).
struct LayerEntry {
  int64_t position = 0;      // tokens consumed
  StateId state = kNoState;  // kNoState: the zero state
  // An in-flight write (WriteLease) of this layer: the page it writes, a
  // loose device page (copy-on-write) or the state's own page (in place).
  bool leased = false;
  int32_t lease_write_page = kZeroStatePage;
  // A draft write in flight (AcquireForDraft): its loose per-token pages
  // [lease_draft_tokens - 1]; adopted into `draft` at Commit.
  int32_t lease_draft_tokens = 0;
  std::array<int32_t, kMaxDecodeTokens - 1> lease_draft_pages{};
  // An open draft (state_cache.h): draft_states[j] is the state after token
  // j + 1 of draft_tokens; `state` is the one after the last.
  int32_t draft_tokens = 0;
  std::array<StateId, kMaxDecodeTokens - 1> draft_states{};
  // A keeping write in flight (AcquireForWriteKeeping): its loose pages and
  // their positions; adopted into `kept` at Commit.
  std::vector<int64_t> lease_keep_positions;
  std::vector<int32_t> lease_keep_pages;
  // Kept states (prefix reuse), ascending by position; `stamp` orders them
  // by last use across the cache (PagedStateCache::kept_order_).
  struct Kept {
    int64_t position = 0;
    StateId state = kNoState;
    uint64_t stamp = 0;
  };
  std::vector<Kept> kept;
};

struct SessionRecord {
  std::string id;
  std::vector<LayerEntry> layers;  // [num_layers]
  absl::Time last_access;
  uint64_t recency = 0;         // larger = more recently used
  int32_t leases_in_flight = 0;
  // The recency list (SessionTable): neighbours, older and newer.
  SessionRecord* older = nullptr;
  SessionRecord* newer = nullptr;
};

class SessionTable {
 public:
  // nullptr when absent.
  SessionRecord* Find(const std::string& id);
  const SessionRecord* Find(const std::string& id) const;
  // A new session of `num_layers` zero states, most recently used. The id
  // must be absent.
  SessionRecord* Insert(const std::string& id, int num_layers, absl::Time now);
  void Erase(const std::string& id);
  // Stamps an access: last_access = now, most recently used.
  void Touch(SessionRecord* session, absl::Time now);

  // Ids in recency order, least recently used first.
  std::vector<std::string> OldestFirst() const;
  // Ids sorted.
  std::vector<std::string> Ids() const;
  // Every session, in no particular order.
  const absl::node_hash_map<std::string, SessionRecord>& sessions() const {
    return sessions_;
  }
  int64_t size() const { return static_cast<int64_t>(sessions_.size()); }

 private:
  void Unlink(SessionRecord* session);

  // Hashed by id (a Forward call looks up every sequence's session); nodes
  // never move, so the records can form the recency list themselves: a
  // touch on every write moves two pointers and allocates nothing.
  absl::node_hash_map<std::string, SessionRecord> sessions_;
  SessionRecord* oldest_ = nullptr;
  SessionRecord* newest_ = nullptr;
  uint64_t next_recency_ = 1;
};

}  // namespace gdn

#endif  // GDN_STATE_CACHE_SESSION_TABLE_H_
