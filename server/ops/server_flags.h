// gdn-server's command-line flags (absl flags, defined in server_flags.cc;
// `gdn-server --help` lists them with their defaults) and their translation
// into a ServerConfig. Call after absl::ParseCommandLine, from main only.
#ifndef GDN_SERVER_OPS_SERVER_FLAGS_H_
#define GDN_SERVER_OPS_SERVER_FLAGS_H_

#include "absl/status/statusor.h"
#include "server/ops/server_config.h"

namespace gdn {

// InvalidArgument naming the flag for unknown names (backend, dtypes, gating)
// or values out of range.
absl::StatusOr<ServerConfig> ServerConfigFromFlags();

}  // namespace gdn

#endif  // GDN_SERVER_OPS_SERVER_FLAGS_H_
