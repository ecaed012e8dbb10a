#include "server/auth/tokens_file.h"

#include <fstream>

#include "gtest/gtest.h"
#include "server/auth/authenticator.h"
#include "tests/server/auth/test_certs.h"

namespace gdn {
namespace {

constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kAlice2[] = "alice-second-token-xyz";
constexpr char kBob[] = "bob-token-abcdefghijkl";

TEST(TokensFile, ParsesTenantsTokensAndQuotas) {
  absl::StatusOr<TokenTable> t = TokenTable::Parse(
      absl::StrCat("# comment\n\nalice ", kAlice, " max_sessions=3  # trailing\n",
                   "alice\t", kAlice2, " max_state_pages=7\n", "bob ", kBob, "\n"),
      {/*max_sessions=*/10, /*max_state_pages=*/20});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_tokens(), 3u);
  EXPECT_EQ(t->TenantNames(), (std::vector<std::string>{"alice", "bob"}));
  std::shared_ptr<const Tenant> alice = t->Find(kAlice2);
  ASSERT_NE(alice, nullptr);
  EXPECT_EQ(alice->name, "alice");
  EXPECT_EQ(alice->quotas.max_sessions, 3);
  EXPECT_EQ(alice->quotas.max_state_pages, 7);
  EXPECT_EQ(t->Find(kAlice).get(), alice.get());
  std::shared_ptr<const Tenant> bob = t->Find(kBob);
  ASSERT_NE(bob, nullptr);
  EXPECT_EQ(bob->quotas.max_sessions, 10);  // the defaults
  EXPECT_EQ(bob->quotas.max_state_pages, 20);
  EXPECT_EQ(t->Find("bob-token-abcdefghijkX"), nullptr);
  EXPECT_EQ(t->Find(""), nullptr);
}

TEST(TokensFile, RefusesBadLinesNamingTheLineButNotTheToken) {
  const std::pair<std::string, std::string> cases[] = {
      {"alice\n", "line 1: expected TENANT TOKEN"},
      {"al/ice tok-0123456789abcdef\n", "line 1: tenant"},
      {"\nalice short\n", "line 2: a token has 16..512"},
      {"alice tok-0123456789abc!ef\n", "line 1: a token is made of"},
      {"alice tok-0123456789abcdef max_pages=3\n", "unknown quota 'max_pages'"},
      {"alice tok-0123456789abcdef max_sessions=-1\n", "expected KEY=N"},
      {"alice tok-0123456789abcdef max_sessions=1\nalice tok-0123456789abcdeX max_sessions=2\n",
       "line 2: max_sessions=2 disagrees"},
      {"alice tok-0123456789abcdef\nbob tok-0123456789abcdef\n", "a token appears twice"},
  };
  for (const auto& [text, expected] : cases) {
    absl::StatusOr<TokenTable> t = TokenTable::Parse(text, {});
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(expected), std::string::npos)
        << t.status() << " for " << text;
    EXPECT_EQ(t.status().message().find("0123456789"), std::string::npos) << t.status();
  }
}

TEST(TokensFile, AcceptsRfc6750Characters) {
  EXPECT_TRUE(TokenTable::Parse("a A-Za_z0.9~+/abcdef==\n", {}).ok());
  EXPECT_FALSE(TokenTable::Parse("a ==Aabcdefghijklmnop\n", {}).ok());
  EXPECT_FALSE(TokenTable::Parse("a Aabcdefghij=klmnop\n", {}).ok());
}

TEST(BearerToken, ParsesTheHeader) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer   abc "), "abc");
  EXPECT_EQ(BearerToken("Basic abc"), "");
  EXPECT_EQ(BearerToken("Bearer"), "");
  EXPECT_EQ(BearerToken("Bearerabc"), "");
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

TEST(Authenticator, AuthenticatesAndReloads) {
  const std::string path = testing::MakeTempDir() + "/tokens";
  WriteFile(path, absl::StrCat("alice ", kAlice, "\n"));
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::Create(path, {});
  ASSERT_TRUE(auth.ok()) << auth.status();
  absl::StatusOr<std::shared_ptr<const Tenant>> t =
      (*auth)->Authenticate(absl::StrCat("Bearer ", kAlice));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->name, "alice");
  EXPECT_EQ((*auth)->Authenticate("").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ((*auth)->Authenticate(kAlice).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ((*auth)->Authenticate(absl::StrCat("Bearer ", kBob)).status().code(),
            absl::StatusCode::kUnauthenticated);

  // Rotation: bob added, alice's token retired.
  WriteFile(path, absl::StrCat("bob ", kBob, "\n"));
  ASSERT_TRUE((*auth)->Reload().ok());
  EXPECT_TRUE((*auth)->Authenticate(absl::StrCat("Bearer ", kBob)).ok());
  EXPECT_EQ((*auth)->Authenticate(absl::StrCat("Bearer ", kAlice)).status().code(),
            absl::StatusCode::kUnauthenticated);
  // A tenant resolved before the reload stays valid for its holder.
  EXPECT_EQ((*t)->name, "alice");

  // A broken file keeps the tokens in force.
  WriteFile(path, "bob short\n");
  EXPECT_EQ((*auth)->Reload().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*auth)->Authenticate(absl::StrCat("Bearer ", kBob)).ok());
  std::remove(path.c_str());
  EXPECT_EQ((*auth)->Reload().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*auth)->Authenticate(absl::StrCat("Bearer ", kBob)).ok());
}

TEST(Authenticator, RefusesToStartWithABrokenFile) {
  EXPECT_EQ(Authenticator::Create("/nonexistent/tokens", {}).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gdn
