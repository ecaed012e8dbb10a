// TLS on the gRPC port with certificates made at test time (test_certs.h):
// server/auth/tls_credentials.h with and without client certificates, and
// tokens over TLS.
#include "server/auth/tls_credentials.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "client/channel_security.h"
#include "gtest/gtest.h"
#include "tests/server/auth/test_certs.h"
#include "tests/server/server_harness.h"

namespace gdn::testing {
namespace {

client::ChannelSecurity Tls(const TestCerts& c, const std::string& ca, bool client_cert) {
  client::ChannelSecurity s;
  s.tls = true;
  s.root_certs_pem = ReadTextFile(ca);
  if (client_cert) {
    s.client_cert_pem = ReadTextFile(c.client_cert);
    s.client_key_pem = ReadTextFile(c.client_key);
  }
  return s;
}

grpc::Status Info(GdnServer& server, const client::ChannelSecurity& security) {
  auto stub = gdn::v1::GdnService::NewStub(
      client::CreateSecureChannel(server.grpc_address(), security, grpc::ChannelArguments()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  gdn::v1::ServerInfoResponse response;
  return stub->GetServerInfo(&context, gdn::v1::ServerInfoRequest(), &response);
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    certs_ = MakeTestCerts();
    ASSERT_FALSE(certs_.ca_cert.empty());
  }
  std::unique_ptr<GdnServer> Start(bool mutual) {
    ServerConfig config = SmallServerConfig();
    config.grpc_tls = {certs_.server_cert, certs_.server_key, mutual ? certs_.ca_cert : ""};
    absl::StatusOr<std::unique_ptr<GdnServer>> server = GdnServer::Start(config);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }
  TestCerts certs_;
};

TEST_F(TlsTest, GrpcPortSpeaksTlsOnly) {
  std::unique_ptr<GdnServer> server = Start(/*mutual=*/false);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(Info(*server, Tls(certs_, certs_.ca_cert, false)).ok());
  // A client that does not trust the server's CA, or speaks plaintext, fails.
  EXPECT_FALSE(Info(*server, Tls(certs_, certs_.other_ca_cert, false)).ok());
  EXPECT_FALSE(Info(*server, client::ChannelSecurity()).ok());
}

TEST_F(TlsTest, MutualTlsNeedsAClientCertificateFromTheCa) {
  std::unique_ptr<GdnServer> server = Start(/*mutual=*/true);
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(Info(*server, Tls(certs_, certs_.ca_cert, false)).ok());
  client::ChannelSecurity untrusted = Tls(certs_, certs_.ca_cert, false);
  untrusted.client_cert_pem = ReadTextFile(certs_.other_client_cert);
  untrusted.client_key_pem = ReadTextFile(certs_.other_client_key);
  EXPECT_FALSE(Info(*server, untrusted).ok());
  EXPECT_TRUE(Info(*server, Tls(certs_, certs_.ca_cert, true)).ok());
}

TEST_F(TlsTest, TokensOverTls) {
  const std::string dir = MakeTempDir();
  {
    std::ofstream out(dir + "/tokens");
    out << "alice alice-token-0123456789\n";
  }
  ServerConfig config = SmallServerConfig();
  config.listen = "0.0.0.0:0";  // allowed: tokens are required
  config.grpc_tls = {certs_.server_cert, certs_.server_key, ""};
  config.tokens_file = dir + "/tokens";
  absl::StatusOr<std::unique_ptr<GdnServer>> server = GdnServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  // gRPC checks the certificate against the target's host: name it.
  const std::string target = absl::StrCat("127.0.0.1:", (*server)->grpc_port());
  client::ChannelSecurity security = Tls(certs_, certs_.ca_cert, false);
  auto info = [&](const client::ChannelSecurity& s) {
    auto stub = gdn::v1::GdnService::NewStub(
        client::CreateSecureChannel(target, s, grpc::ChannelArguments()));
    grpc::ClientContext context;
    gdn::v1::ServerInfoResponse response;
    return stub->GetServerInfo(&context, gdn::v1::ServerInfoRequest(), &response);
  };
  EXPECT_EQ(info(security).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  security.bearer_token = "alice-token-0123456789";
  EXPECT_TRUE(info(security).ok());
}

TEST(TlsConfig, MissingOrHalfConfiguredFilesAreRefused) {
  ServerConfig config = SmallServerConfig();
  config.grpc_tls = {"/nonexistent/cert.pem", "/nonexistent/key.pem", ""};
  EXPECT_EQ(GdnServer::Start(config).status().code(), absl::StatusCode::kNotFound);
  config.grpc_tls = {"/nonexistent/cert.pem", "", ""};
  EXPECT_EQ(GdnServer::Start(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.grpc_tls = {"", "", "/nonexistent/ca.pem"};
  EXPECT_EQ(GdnServer::Start(config).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ListenPolicyServer, RefusesAnOpenRemoteListener) {
  ServerConfig config = SmallServerConfig();
  config.listen = "0.0.0.0:0";
  EXPECT_EQ(GdnServer::Start(config).status().code(), absl::StatusCode::kFailedPrecondition);
  config.allow_insecure_remote = true;
  absl::StatusOr<std::unique_ptr<GdnServer>> server = GdnServer::Start(config);
  EXPECT_TRUE(server.ok()) << server.status();
}

}  // namespace
}  // namespace gdn::testing
