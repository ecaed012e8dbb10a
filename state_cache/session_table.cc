#include "state_cache/session_table.h"

#include <algorithm>

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
  auto [it, inserted] = sessions_.try_emplace(id);
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
  Unlink(&it->second);
  sessions_.erase(it);
}

void SessionTable::Unlink(SessionRecord* session) {
  if (session->recency == 0) return;  // not in the list yet
  (session->older != nullptr ? session->older->newer : oldest_) = session->newer;
  (session->newer != nullptr ? session->newer->older : newest_) = session->older;
  session->older = session->newer = nullptr;
}

void SessionTable::Touch(SessionRecord* session, absl::Time now) {
  session->last_access = now;
  if (session != newest_) {
    Unlink(session);
    session->older = newest_;
    (newest_ != nullptr ? newest_->newer : oldest_) = session;
    newest_ = session;
  }
  session->recency = next_recency_++;
}

std::vector<std::string> SessionTable::OldestFirst() const {
  std::vector<std::string> ids;
  ids.reserve(sessions_.size());
  for (const SessionRecord* s = oldest_; s != nullptr; s = s->newer) ids.push_back(s->id);
  return ids;
}

std::vector<std::string> SessionTable::Ids() const {
  std::vector<std::string> ids;
  ids.reserve(sessions_.size());
  for (const auto& [id, session] : sessions_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace gdn
