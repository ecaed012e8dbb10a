// How a client reaches a server that wants TLS and bearer tokens (README:
// Security): the channel's credentials (TLS with the server's CA, and a
// client certificate for mutual TLS) and the `authorization: Bearer <token>`
// metadata that every call on the channel carries.
//
// The token is added by a client interceptor, not by gRPC call credentials:
// gRPC sends call credentials only over TLS, and a server on loopback or a
// Unix socket may take tokens without TLS (a same-host runner, the tests).
#ifndef GDN_CLIENT_CHANNEL_SECURITY_H_
#define GDN_CLIENT_CHANNEL_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gdn::client {

struct ChannelSecurity {
  bool tls = false;
  std::string root_certs_pem;    // "" with tls: the system's roots
  std::string client_cert_pem;   // mutual TLS (with client_key_pem)
  std::string client_key_pem;
  std::string server_name;       // "" : the target's host name is checked
  std::string bearer_token;      // "" : no authorization metadata
};

// The same from files (each "" = not given): tls is on when any TLS file or
// `tls` is given. `token_file` holds the token (surrounding whitespace
// dropped); without one the GDN_TOKEN environment variable is used, when
// set. NotFound naming a file that cannot be read.
absl::StatusOr<ChannelSecurity> LoadChannelSecurity(bool tls, const std::string& ca_file,
                                                    const std::string& cert_file,
                                                    const std::string& key_file,
                                                    const std::string& server_name,
                                                    const std::string& token_file);

// Insecure credentials, or SSL credentials from `security`.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const ChannelSecurity& security);

// A channel to `target` with `security`'s credentials and token.
std::shared_ptr<grpc::Channel> CreateSecureChannel(const std::string& target,
                                                   const ChannelSecurity& security,
                                                   const grpc::ChannelArguments& args);

}  // namespace gdn::client

#endif  // GDN_CLIENT_CHANNEL_SECURITY_H_
