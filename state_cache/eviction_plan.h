// Which sessions to evict so that a write can get its device pages, when the
// config allows eviction and spilling alone cannot make room.
//
// Policy, least recently used first:
//   1. Take candidates (every session but the requester and those with
//      writes in flight, whose pages are pinned) from the least recently
//      used on, until dropping their references frees enough pages.
//      Forks share pages, so one candidate may free nothing on its own and
//      the page only when a later sharer goes too.
//   2. Give back every taken session the plan does not need after all (a
//      fork whose pages a survivor still holds), trying the most recently
//      used first.
// Planned on counts only: when evicting every candidate would not be
// enough the plan fails and nothing is evicted.
#ifndef GDN_STATE_CACHE_EVICTION_PLAN_H_
#define GDN_STATE_CACHE_EVICTION_PLAN_H_

#include <optional>
#include <string>
#include <vector>

#include "state_cache/session_table.h"
#include "state_cache/tiered_page_store.h"

namespace gdn {

// Ids to evict, least recently used first; nullopt when no set of
// evictions would make `wanted` device pages obtainable from `room`.
std::optional<std::vector<std::string>> PlanEviction(
    const SessionTable& sessions, const TieredPageStore& store,
    const std::string& requester, TierRoom room, int wanted,
    bool first_frees_host);

}  // namespace gdn

#endif  // GDN_STATE_CACHE_EVICTION_PLAN_H_
