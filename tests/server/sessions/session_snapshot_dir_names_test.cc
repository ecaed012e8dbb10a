// The pure pieces of --snapshot_dir (server/sessions/session_snapshot_dir.h):
// session ids escaped into file names that round-trip, stay short and never
// name a path elsewhere; the atomic write that leaves no temporary file.
#include <cctype>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/session_file.h"
#include "server/sessions/session_snapshot_dir.h"
#include "tests/server/temp_dir.h"

namespace gdn {
namespace {

using gdn::testing::TempDir;

std::vector<std::string> OddIds() {
  return {"a",
          "alice",
          "a/b",
          "..",
          ".",
          "../../etc/passwd",
          "%",
          "%2E",
          "a b",
          "x.gdnsnap",
          "-",
          "_",
          "~",
          "CON",
          "\xc3\xbc\xe6\x97\xa5\xe6\x9c\xac",  // "ü日本" in UTF-8
          "\xf0\x9f\x98\x80",                  // an emoji
          "\xff\xfe",
          std::string(100, 'z')};
}

TEST(EscapeSessionIdTest, RoundTripsOddIdsIntoSafeNames) {
  std::set<std::string> names;
  for (const std::string& id : OddIds()) {
    const std::string escaped = EscapeSessionId(id);
    SCOPED_TRACE(escaped);
    EXPECT_LE(escaped.size(), kMaxEscapedIdBytes);
    for (char c : escaped) {
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                  c == '-' || c == '%' || c == '~')
          << "byte " << static_cast<int>(c);
    }
    EXPECT_NE(escaped.front(), '.');
    const std::optional<std::string> back = UnescapeSessionId(escaped);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, id);
    names.insert(escaped);
  }
  EXPECT_EQ(names.size(), OddIds().size());  // no two ids share a name
  EXPECT_EQ(EscapeSessionId(".."), "%2E%2E");
  EXPECT_EQ(EscapeSessionId("a/b"), "a%2Fb");
}

TEST(EscapeSessionIdTest, LongIdsAreShortenedWithAHash) {
  const std::vector<std::string> long_ids = {
      std::string(256, 'a'), std::string(255, 'a') + "b",
      std::string(256, '/'), std::string(255, '/') + "a",
      [] {
        std::string s;
        while (s.size() < 250) s += "\xe6\x97\xa5";  // 3-byte UTF-8
        return s;
      }()};
  std::set<std::string> names;
  for (const std::string& id : long_ids) {
    const std::string escaped = EscapeSessionId(id);
    SCOPED_TRACE(escaped);
    EXPECT_LE(escaped.size(), kMaxEscapedIdBytes);
    EXPECT_NE(escaped.find('~'), std::string::npos);
    EXPECT_FALSE(UnescapeSessionId(escaped).has_value());
    EXPECT_EQ(EscapeSessionId(id), escaped);  // stable
    names.insert(escaped);
    // The whole file name, with the longest suffix, stays under NAME_MAX.
    EXPECT_LT(escaped.size() + std::string(".gdnsnap.4194304-0123456789abcdef-"
                                           "18446744073709551615.rejected")
                                   .size(),
              255u);
  }
  EXPECT_EQ(names.size(), long_ids.size());
}

TEST(EscapeSessionIdTest, UnescapeTakesOnlyCanonicalSpellings) {
  EXPECT_FALSE(UnescapeSessionId("%41").has_value());  // "A" is kept as is
  EXPECT_FALSE(UnescapeSessionId("%2e").has_value());  // lower-case hex
  EXPECT_FALSE(UnescapeSessionId("a.b").has_value());
  EXPECT_FALSE(UnescapeSessionId("%4").has_value());
  EXPECT_FALSE(UnescapeSessionId("a%").has_value());
  EXPECT_EQ(UnescapeSessionId("a%2Fb").value_or(""), "a/b");
}

TEST(WriteFileAtomicallyTest, WritesReplacesAndLeavesNoTemporaryFile) {
  TempDir dir("gdn_snapshot_dir_names_test");
  const std::string path = dir.path() + "/f.gdnsnap";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, std::string(1 << 20, 'x')).ok());
  absl::StatusOr<std::string> back = wire::ReadFileBytes(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, std::string(1 << 20, 'x'));
  EXPECT_THAT(dir.Names(), ::testing::ElementsAre("f.gdnsnap"));
  EXPECT_FALSE(WriteFileAtomically(dir.path() + "/no/such/dir/f", "x").ok());
  EXPECT_THAT(dir.Names(), ::testing::ElementsAre("f.gdnsnap"));
}

}  // namespace
}  // namespace gdn
