#include "client/routing_key.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace gdn::client {
namespace {

TEST(RoutingKeyTest, PrefixBeforeFirstSlashElseWholeId) {
  EXPECT_EQ(RoutingKey("tenant7/chat-3"), "tenant7");
  EXPECT_EQ(RoutingKey("tenant7/chat/3"), "tenant7");
  EXPECT_EQ(RoutingKey("chat-3"), "chat-3");
  EXPECT_EQ(RoutingKey("/x"), "");
  EXPECT_EQ(RoutingKey(""), "");
}

TEST(RoutingKeyTest, HeaderValueIsPrintableAndDeterministic) {
  EXPECT_EQ(RouteHeaderValue("tenant7"), "tenant7");
  EXPECT_EQ(RouteHeaderValue("a b%c\xff"), "a%20b%25c%FF");
  EXPECT_EQ(RouteHeaderValue("\x01"), RouteHeaderValue("\x01"));
}

TEST(RoutingKeyTest, CommonKeyOrInvalidArgumentNamingTheIds) {
  EXPECT_EQ(*CommonRoutingKey({"g/a", "g/b", "g"}), "g");
  EXPECT_EQ(*CommonRoutingKey({}), "");
  absl::StatusOr<std::string> bad = CommonRoutingKey({"g/a", "h/b"});
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("g/a, h/b"), std::string::npos) << bad.status();
}

TEST(RoutingKeyTest, NewIdsAreUniqueAndKeepTheirGroup) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(NewSessionId());
  EXPECT_EQ(ids.size(), 1000u);
  for (const std::string& id : ids) EXPECT_EQ(RoutingKey(id), id);
  const std::string group = NewRouteGroup();
  EXPECT_EQ(group.find('/'), std::string::npos);
  const std::string a = NewSessionId(group), b = NewSessionId(group);
  EXPECT_NE(a, b);
  EXPECT_EQ(RoutingKey(a), group);
  EXPECT_EQ(RoutingKey(b), group);
}

}  // namespace
}  // namespace gdn::client
