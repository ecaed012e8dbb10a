#include "tests/server/auth/tenant_fixture.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "client/channel_security.h"
#include "gtest/gtest.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/server/auth/test_certs.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"

namespace gdn::testing {

std::string ThreeTenants(const std::string& alice_quotas) {
  return absl::StrCat("alice ", kAliceToken, " ", alice_quotas, "\nbob ", kBobToken,
                      "\ncarol ", kCarolToken, "\n");
}

TenantServer::TenantServer(const std::string& tokens)
    : TenantServer(tokens, SmallServerConfig()) {}

TenantServer::TenantServer(const std::string& tokens, ServerConfig config)
    : dir_(MakeTempDir()), tokens_path_(dir_ + "/tokens"), config_(std::move(config)) {
  WriteTokens(tokens);
  config_.tokens_file = tokens_path_;
  absl::StatusOr<std::unique_ptr<GdnServer>> server = GdnServer::Start(config_);
  EXPECT_TRUE(server.ok()) << server.status();
  if (server.ok()) server_ = std::move(*server);
}

TenantServer::~TenantServer() {
  if (server_ != nullptr) server_->Shutdown();
  std::remove(tokens_path_.c_str());
  rmdir(dir_.c_str());
}

void TenantServer::WriteTokens(const std::string& tokens) {
  std::ofstream out(tokens_path_, std::ios::trunc);
  out << tokens;
}

std::shared_ptr<grpc::Channel> TenantServer::Channel(const std::string& token) {
  client::ChannelSecurity security;
  security.bearer_token = token;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  return client::CreateSecureChannel(server_->grpc_address(), security, args);
}

std::unique_ptr<gdn::v1::GdnService::Stub> TenantServer::Stub(const std::string& token) {
  return gdn::v1::GdnService::NewStub(Channel(token));
}

gdn::v1::ForwardRequest OneTokenForward(const ServerConfig& config, const std::string& session,
                                        int64_t position, int32_t layer, uint64_t seed) {
  const oracle::Inputs inputs = MakeRandomInputs(config.options, {1}, seed, false);
  return BuildForwardRequest(config.options, layer, {{session, position}}, inputs);
}

}  // namespace gdn::testing
