#include "client/routing_key.h"

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace gdn::client {
namespace {

uint64_t RandomBits() {
  static absl::Mutex mu(absl::kConstInit);
  static absl::BitGen* gen = nullptr;
  absl::MutexLock lock(&mu);
  if (gen == nullptr) gen = new absl::BitGen();
  return absl::Uniform<uint64_t>(*gen);
}

}  // namespace

std::string RoutingKey(absl::string_view session_id) {
  const size_t slash = session_id.find('/');
  return std::string(slash == absl::string_view::npos ? session_id
                                                      : session_id.substr(0, slash));
}

std::string RouteHeaderValue(absl::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u > 0x20 && u < 0x7f && c != '%') {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "%%%02X", u);
    }
  }
  return out;
}

absl::StatusOr<std::string> CommonRoutingKey(const std::vector<std::string>& session_ids) {
  if (session_ids.empty()) return std::string();
  const std::string key = RoutingKey(session_ids.front());
  for (const std::string& id : session_ids) {
    if (RoutingKey(id) != key) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sessions ", absl::StrJoin(session_ids, ", "),
          " have different routing keys ('", key, "', '", RoutingKey(id),
          "'): behind a proxy they may live on different servers. Sessions "
          "of one call need ids with a common prefix before '/' "
          "(client/routing_key.h)"));
    }
  }
  return key;
}

std::string NewSessionId(absl::string_view group) {
  const std::string suffix =
      absl::StrFormat("%016x%08x", RandomBits(), static_cast<uint32_t>(RandomBits()));
  if (group.empty()) return absl::StrCat("g-", suffix);
  return absl::StrCat(group, "/s-", suffix);
}

std::string NewRouteGroup() { return absl::StrFormat("r-%016x", RandomBits()); }

}  // namespace gdn::client
