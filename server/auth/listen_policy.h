// Who may reach an open server. Without a tokens file anyone who reaches
// the gRPC port can read, write and close every session, so gdn-server
// listens without one only where nobody else can reach it: a loopback
// address (127.0.0.0/8, ::1, localhost) or a Unix socket. Any other address
// (0.0.0.0, a pod IP, a host name) needs --tokens_file, or
// --allow_insecure_remote to say that something in front (a proxy that
// authenticates, a private network) does the job.
#ifndef GDN_SERVER_AUTH_LISTEN_POLICY_H_
#define GDN_SERVER_AUTH_LISTEN_POLICY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gdn {

// "unix:/path", "127.0.0.1:50051", "[::1]:0", "localhost:1" -> true.
bool IsLoopbackListen(absl::string_view listen);

// FailedPrecondition explaining the flags when the gRPC address is not
// loopback, no tokens file is set and remote is not allowed.
absl::Status CheckListenPolicy(const std::string& listen, bool has_tokens,
                               bool allow_insecure_remote);

}  // namespace gdn

#endif  // GDN_SERVER_AUTH_LISTEN_POLICY_H_
