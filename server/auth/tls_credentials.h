// TLS for the gRPC port: --tls_cert_file / --tls_key_file (PEM; the
// certificate file may hold the chain after the leaf) and, for mutual TLS,
// --tls_client_ca_file (PEM CA bundle: every client must then present a
// certificate it signed). Files are read once at start.
#ifndef GDN_SERVER_AUTH_TLS_CREDENTIALS_H_
#define GDN_SERVER_AUTH_TLS_CREDENTIALS_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/ops/server_config.h"

namespace gdn {


// Insecure credentials when !files.enabled(); else SSL credentials from the
// files (NotFound / InvalidArgument naming the file that cannot be read or
// holds no PEM block).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const TlsFiles& files);

// A whole (small) file; NotFound naming it when it cannot be read.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what);

}  // namespace gdn

#endif  // GDN_SERVER_AUTH_TLS_CREDENTIALS_H_
