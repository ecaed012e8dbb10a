#include "client/security_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(bool, tls, false,
          "connect with TLS (implied by --tls_ca_file / --tls_cert_file); the system's roots "
          "unless --tls_ca_file");
ABSL_FLAG(std::string, tls_ca_file, "", "PEM CA bundle that signed the server's certificate");
ABSL_FLAG(std::string, tls_cert_file, "", "PEM client certificate (mutual TLS)");
ABSL_FLAG(std::string, tls_key_file, "", "PEM key of --tls_cert_file");
ABSL_FLAG(std::string, tls_server_name, "",
          "name to check in the server's certificate (default: the --server host)");
ABSL_FLAG(std::string, token_file, "",
          "file holding the bearer token sent as 'authorization: Bearer <token>' "
          "(default: the GDN_TOKEN environment variable, when set)");

namespace gdn::client {

absl::StatusOr<ChannelSecurity> ChannelSecurityFromFlags() {
  return LoadChannelSecurity(absl::GetFlag(FLAGS_tls), absl::GetFlag(FLAGS_tls_ca_file),
                             absl::GetFlag(FLAGS_tls_cert_file), absl::GetFlag(FLAGS_tls_key_file),
                             absl::GetFlag(FLAGS_tls_server_name),
                             absl::GetFlag(FLAGS_token_file));
}

}  // namespace gdn::client
