#include "client/channel_security.h"

#include <grpcpp/support/client_interceptor.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gdn::client {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot be read"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Adds `authorization: Bearer <token>` to every call's initial metadata.
class BearerTokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *header_);
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;  // owned by the factory, which outlives the channel's calls
};

class BearerTokenInterceptorFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(const std::string& token)
      : header_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

absl::StatusOr<ChannelSecurity> LoadChannelSecurity(bool tls, const std::string& ca_file,
                                                    const std::string& cert_file,
                                                    const std::string& key_file,
                                                    const std::string& server_name,
                                                    const std::string& token_file) {
  ChannelSecurity s;
  s.tls = tls || !ca_file.empty() || !cert_file.empty() || !key_file.empty();
  s.server_name = server_name;
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError("a client certificate needs its key, and a key its "
                                      "certificate");
  }
  for (const auto& [path, out, what] :
       {std::tuple<const std::string&, std::string*, const char*>{ca_file, &s.root_certs_pem,
                                                                  "TLS CA file"},
        {cert_file, &s.client_cert_pem, "TLS certificate"},
        {key_file, &s.client_key_pem, "TLS key"}}) {
    if (path.empty()) continue;
    absl::StatusOr<std::string> text = ReadFile(path, what);
    if (!text.ok()) return text.status();
    *out = std::move(*text);
  }
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = ReadFile(token_file, "token file");
    if (!token.ok()) return token.status();
    s.bearer_token = std::string(absl::StripAsciiWhitespace(*token));
  } else if (const char* env = std::getenv("GDN_TOKEN"); env != nullptr) {
    s.bearer_token = std::string(absl::StripAsciiWhitespace(env));
  }
  return s;
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const ChannelSecurity& security) {
  if (!security.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.root_certs_pem;
  options.pem_cert_chain = security.client_cert_pem;
  options.pem_private_key = security.client_key_pem;
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> CreateSecureChannel(const std::string& target,
                                                   const ChannelSecurity& security,
                                                   const grpc::ChannelArguments& args) {
  grpc::ChannelArguments with_name = args;
  if (security.tls && !security.server_name.empty()) {
    with_name.SetSslTargetNameOverride(security.server_name);
  }
  if (security.bearer_token.empty()) {
    return grpc::CreateCustomChannel(target, ChannelCredentialsFor(security), with_name);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<BearerTokenInterceptorFactory>(security.bearer_token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, ChannelCredentialsFor(security), with_name, std::move(factories));
}

}  // namespace gdn::client
