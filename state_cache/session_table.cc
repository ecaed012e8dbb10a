#include "state_cache/session_table.h"

#include "state_cache/invariant.h"

namespace gdn {

SessionRecord* SessionTable::Find(const std::string& id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : &it->second;
}

const SessionRecord* SessionTable::Find(const std::string& id) const {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : &it->second;
}

SessionRecord* SessionTable::Insert(const std::string& id, int num_layers,
                                    absl::Time now) {
  auto [it, inserted] = sessions_.emplace(id, SessionRecord{});
  GDN_CACHE_INVARIANT(inserted);
  SessionRecord& session = it->second;
  session.id = id;
  session.layers.resize(num_layers);
  Touch(&session, now);
  return &session;
}

void SessionTable::Erase(const std::string& id) {
  auto it = sessions_.find(id);
  GDN_CACHE_INVARIANT(it != sessions_.end());
  by_recency_.erase(it->second.recency);
  sessions_.erase(it);
}

void SessionTable::Touch(SessionRecord* session, absl::Time now) {
  if (session->recency != 0) by_recency_.erase(session->recency);
  session->recency = next_recency_++;
  session->last_access = now;
  by_recency_.emplace(session->recency, &session->id);
}

std::vector<std::string> SessionTable::OldestFirst() const {
  std::vector<std::string> ids;
  ids.reserve(by_recency_.size());
  for (const auto& [recency, id] : by_recency_) ids.push_back(*id);
  return ids;
}

std::vector<std::string> SessionTable::Ids() const {
  std::vector<std::string> ids;
  ids.reserve(sessions_.size());
  for (const auto& [id, session] : sessions_) ids.push_back(id);
  return ids;
}

}  // namespace gdn
