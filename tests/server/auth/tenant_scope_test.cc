#include "server/auth/tenant_scope.h"

#include "gtest/gtest.h"
#include "server/auth/listen_policy.h"
#include "server/sessions/session_id.h"

namespace gdn {
namespace {

TenantScope ScopeOf(const std::string& name) {
  auto tenant = std::make_shared<Tenant>();
  tenant->name = name;
  return TenantScope(tenant);
}

TEST(TenantScope, OpenScopeKeepsIds) {
  TenantScope open;
  EXPECT_TRUE(open.open());
  EXPECT_EQ(open.owner(), "");
  EXPECT_EQ(open.Inward("a/b"), "a/b");
  EXPECT_EQ(open.Outward("a/b"), "a/b");
  EXPECT_TRUE(open.Owns("anything"));
  EXPECT_EQ(open.max_id_bytes(), kMaxSessionIdBytes);
}

TEST(TenantScope, TenantIdsArePrefixedAndUnambiguous) {
  TenantScope alice = ScopeOf("alice");
  TenantScope al = ScopeOf("al");
  EXPECT_EQ(alice.Inward("chat/1"), "alice/chat/1");
  EXPECT_EQ(alice.Outward("alice/chat/1"), "chat/1");
  EXPECT_TRUE(alice.Owns("alice/chat/1"));
  // "al" naming "ice/x" is "al/ice/x", never alice's "alice/x".
  EXPECT_EQ(al.Inward("ice/x"), "al/ice/x");
  EXPECT_FALSE(al.Owns("alice/x"));
  EXPECT_FALSE(alice.Owns("al/ice/x"));
}

TEST(TenantScope, IdLimitLeavesRoomForThePrefix) {
  TenantScope alice = ScopeOf("alice");
  EXPECT_EQ(alice.max_id_bytes(), kMaxSessionIdBytes - 6);
  EXPECT_TRUE(alice.ValidateId(std::string(250, 'x'), "session_id").ok());
  absl::Status s = alice.ValidateId(std::string(251, 'x'), "session_id");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "session_id: at most 250 bytes for this tenant, got 251");
  EXPECT_EQ(alice.ValidateRequiredId("", "session_id").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(alice.ValidateId("", "child_id").ok());
}

TEST(TenantScope, OutwardStatusShowsTheCallersIds) {
  TenantScope alice = ScopeOf("alice");
  absl::Status s = alice.Outward(absl::NotFoundError("no session 'alice/chat-1'"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no session 'chat-1'");
  EXPECT_EQ(alice.Outward(absl::OkStatus()), absl::OkStatus());
}

TEST(ListenPolicy, LoopbackAndUnixAreOpen) {
  for (const char* listen : {"127.0.0.1:50051", "127.9.9.9:0", "[::1]:1", "localhost:5",
                             "unix:/tmp/x.sock"}) {
    EXPECT_TRUE(IsLoopbackListen(listen)) << listen;
    EXPECT_TRUE(CheckListenPolicy(listen, false, false).ok()) << listen;
  }
  for (const char* listen : {"0.0.0.0:50051", "[::]:1", "10.0.0.7:5", "example.com:1"}) {
    EXPECT_FALSE(IsLoopbackListen(listen)) << listen;
    absl::Status s = CheckListenPolicy(listen, false, false);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << listen;
    EXPECT_NE(s.message().find("--allow_insecure_remote"), std::string::npos);
    EXPECT_TRUE(CheckListenPolicy(listen, true, false).ok()) << listen;
    EXPECT_TRUE(CheckListenPolicy(listen, false, true).ok()) << listen;
  }
}

}  // namespace
}  // namespace gdn
