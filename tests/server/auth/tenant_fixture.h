// Test-only: an in-process GdnServer with a tokens file (alice, bob and
// carol) and clients that send a tenant's token, for the tenancy and quota
// tests.
#ifndef GDN_TESTS_SERVER_AUTH_TENANT_FIXTURE_H_
#define GDN_TESTS_SERVER_AUTH_TENANT_FIXTURE_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "gdn/v1/gdn.grpc.pb.h"
#include "server/gdn_server.h"
#include "server/ops/server_config.h"

namespace gdn::testing {

inline constexpr char kAliceToken[] = "alice-token-0123456789";
inline constexpr char kBobToken[] = "bob-token-0123456789ab";
inline constexpr char kCarolToken[] = "carol-token-0123456789";

// "alice <token>\nbob <token>\ncarol <token>\n" plus `extra` on alice's line.
std::string ThreeTenants(const std::string& alice_quotas = "");

class TenantServer {
 public:
  // SmallServerConfig() with a tokens file holding `tokens`.
  explicit TenantServer(const std::string& tokens);
  TenantServer(const std::string& tokens, ServerConfig config);
  ~TenantServer();

  GdnServer& server() { return *server_; }
  const ServerConfig& config() const { return config_; }
  // A channel whose calls carry `token` ("" : none).
  std::shared_ptr<grpc::Channel> Channel(const std::string& token);
  std::unique_ptr<gdn::v1::GdnService::Stub> Stub(const std::string& token);
  // Replaces the tokens file (then server().ReloadTokens()).
  void WriteTokens(const std::string& tokens);

 private:
  std::string dir_;
  std::string tokens_path_;
  ServerConfig config_;
  std::unique_ptr<GdnServer> server_;
};

// A one-token Forward request for (session, position) on `layer`, inputs
// from `seed`.
gdn::v1::ForwardRequest OneTokenForward(const ServerConfig& config, const std::string& session,
                                        int64_t position, int32_t layer = 0, uint64_t seed = 1);

}  // namespace gdn::testing

#endif  // GDN_TESTS_SERVER_AUTH_TENANT_FIXTURE_H_
