// Per-tenant quotas (server/auth/tenant_quota.h): sessions and state pages,
// refused RESOURCE_EXHAUSTED naming the quota, changing nothing, and only
// for the tenant over its quota.
#include <grpcpp/grpcpp.h>

#include "gtest/gtest.h"
#include "tests/server/auth/tenant_fixture.h"
#include "tests/server/server_harness.h"

namespace gdn::testing {
namespace {

using Stub = gdn::v1::GdnService::Stub;

grpc::Status Create(Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  gdn::v1::CreateSessionRequest request;
  request.set_session_id(id);
  gdn::v1::CreateSessionResponse response;
  return stub.CreateSession(&context, request, &response);
}

grpc::Status Fork(Stub& stub, const std::string& parent, const std::string& child) {
  grpc::ClientContext context;
  gdn::v1::ForkSessionRequest request;
  request.set_parent_id(parent);
  request.set_child_id(child);
  gdn::v1::ForkSessionResponse response;
  return stub.ForkSession(&context, request, &response);
}

grpc::Status Close(Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  gdn::v1::CloseSessionRequest request;
  request.set_session_id(id);
  gdn::v1::CloseSessionResponse response;
  return stub.CloseSession(&context, request, &response);
}

grpc::Status Forward(Stub& stub, const gdn::v1::ForwardRequest& request) {
  grpc::ClientContext context;
  gdn::v1::ForwardResponse response;
  return stub.Forward(&context, request, &response);
}

void ExpectQuota(const grpc::Status& s, const std::string& quota) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("tenant quota " + quota), std::string::npos)
      << s.error_message();
}

TEST(TenantQuota, SessionsPerTenant) {
  TenantServer server(ThreeTenants("max_sessions=2"));
  auto alice = server.Stub(kAliceToken);
  auto bob = server.Stub(kBobToken);
  ASSERT_TRUE(Create(*alice, "a").ok());
  ASSERT_TRUE(Create(*alice, "b").ok());
  ExpectQuota(Create(*alice, "c"), "max_sessions");
  ExpectQuota(Fork(*alice, "a", "c"), "max_sessions");
  // Other tenants are not limited by alice's quota.
  for (const char* id : {"a", "b", "c"}) EXPECT_TRUE(Create(*bob, id).ok());
  // Closing one makes room again.
  ASSERT_TRUE(Close(*alice, "b").ok());
  EXPECT_TRUE(Fork(*alice, "a", "c").ok());
  const std::string metrics = ScrapeMetrics(server.server().metrics_port());
  EXPECT_EQ(MetricValue(metrics, "gdn_tenant_quota_refusals_total",
                        {"tenant=\"alice\"", "quota=\"max_sessions\""}),
            2);
}

TEST(TenantQuota, StatePagesPerTenant) {
  // Two layers per session: a session written on both layers holds 2 pages.
  TenantServer server(ThreeTenants("max_state_pages=3"));
  auto alice = server.Stub(kAliceToken);
  const ServerConfig& config = server.config();
  ASSERT_TRUE(Create(*alice, "s1").ok());
  ASSERT_TRUE(Create(*alice, "s2").ok());
  ASSERT_TRUE(Forward(*alice, OneTokenForward(config, "s1", 0, 0)).ok());  // 1 page
  ASSERT_TRUE(Forward(*alice, OneTokenForward(config, "s1", 0, 1)).ok());  // 2
  ASSERT_TRUE(Forward(*alice, OneTokenForward(config, "s2", 0, 0)).ok());  // 3
  // A fourth page is refused and changes nothing ...
  ExpectQuota(Forward(*alice, OneTokenForward(config, "s2", 0, 1)), "max_state_pages");
  // ... while writing states the tenant already has needs no new page.
  EXPECT_TRUE(Forward(*alice, OneTokenForward(config, "s1", 1, 0)).ok());
  EXPECT_TRUE(Forward(*alice, OneTokenForward(config, "s2", 1, 0)).ok());
  // A fork brings its parent's pages.
  ExpectQuota(Fork(*alice, "s1", "f"), "max_state_pages");
  // Bob is not limited by alice's quota.
  auto bob = server.Stub(kBobToken);
  ASSERT_TRUE(Create(*bob, "s1").ok());
  for (int layer = 0; layer < 2; ++layer) {
    EXPECT_TRUE(Forward(*bob, OneTokenForward(config, "s1", 0, layer)).ok());
  }
  // Closing a session frees its pages for the quota.
  ASSERT_TRUE(Close(*alice, "s1").ok());
  EXPECT_TRUE(Forward(*alice, OneTokenForward(config, "s2", 0, 1)).ok());
}

}  // namespace
}  // namespace gdn::testing
