#include "server/auth/listen_policy.h"

#include <arpa/inet.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gdn {

bool IsLoopbackListen(absl::string_view listen) {
  if (absl::StartsWith(listen, "unix:")) return true;
  const size_t colon = listen.rfind(':');
  if (colon == absl::string_view::npos) return false;
  std::string host(listen.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;
}

absl::Status CheckListenPolicy(const std::string& listen, bool has_tokens,
                               bool allow_insecure_remote) {
  if (has_tokens || allow_insecure_remote || IsLoopbackListen(listen)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to serve ", listen,
      " without authentication: any client reaching it could read, write and close every "
      "session. Pass --tokens_file (bearer tokens per tenant), listen on a loopback address "
      "or unix:/path, or pass --allow_insecure_remote when something in front authenticates"));
}

}  // namespace gdn
