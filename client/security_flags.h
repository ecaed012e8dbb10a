// The security flags gdn-cli and gdn-bench share (README: Security):
//   --tls                 TLS with the system's roots (implied by the files below)
//   --tls_ca_file         PEM CA bundle the server's certificate must chain to
//   --tls_cert_file, --tls_key_file   client certificate and key (mutual TLS)
//   --tls_server_name     the name checked in the server's certificate (default:
//                         the --server host)
//   --token_file          a file holding the bearer token (default: $GDN_TOKEN)
#ifndef GDN_CLIENT_SECURITY_FLAGS_H_
#define GDN_CLIENT_SECURITY_FLAGS_H_

#include "absl/status/statusor.h"
#include "client/channel_security.h"

namespace gdn::client {

absl::StatusOr<ChannelSecurity> ChannelSecurityFromFlags();

}  // namespace gdn::client

#endif  // GDN_CLIENT_SECURITY_FLAGS_H_
