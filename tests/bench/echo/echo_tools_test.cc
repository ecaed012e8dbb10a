// The binaries: gdn-echo prints its one start-up line, serves, and exits 0 on
// SIGTERM (2 on bad flags); gdn-min-client measures against it in both modes
// and over a Unix socket, printing percentiles and writing JSON.
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/bench/echo/echo_process.h"

namespace gdn::echo::testing {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kSmallShape = {"--layers=2", "--qk_heads=2", "--v_heads=4",
                                              "--head_dim_k=16", "--head_dim_v=8"};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(EchoToolsTest, MinClientAgainstBothModesAndAUnixSocket) {
  const std::string sock =
      "unix:" + ::testing::TempDir() + "/gdn_echo_tool_" + std::to_string(getpid()) + ".sock";
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{{"--mode=proto"}, {"--mode=raw"},
                                             {"--mode=raw", "--listen=" + sock},
                                             {"--mode=proto", "--default_transport"}}) {
    std::vector<std::string> flags = kSmallShape;
    flags.insert(flags.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<EchoProcess>> echo = EchoProcess::Start(GDN_ECHO_BINARY, flags);
    ASSERT_TRUE(echo.ok()) << echo.status();
    const std::string json = ::testing::TempDir() + "/min_client.json";
    std::remove(json.c_str());
    const CommandResult r = RunCommand(absl::StrCat(
        GDN_MIN_CLIENT_BINARY, " --server=", (*echo)->address(),
        " --sessions=3 --tokens=2 --calls=30 --warmup_calls=3 --json_out=", json));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("p50"));
    // o: 6 tokens x Hv 4 x V 8 x 2 bytes (bf16).
    EXPECT_THAT(r.output, HasSubstr("o 384 bytes"));
    const std::string j = ReadFile(json);
    EXPECT_THAT(j, HasSubstr("\"p99_us\""));
    EXPECT_THAT(j, HasSubstr("\"count\": 30"));
    EXPECT_EQ((*echo)->Stop(), 0);
  }
}

TEST(EchoToolsTest, BadFlagsExitWith2) {
  EXPECT_EQ(RunCommand(absl::StrCat(GDN_ECHO_BINARY, " --mode=protobuf")).exit_code, 2);
  EXPECT_EQ(RunCommand(absl::StrCat(GDN_ECHO_BINARY, " --v_heads=0")).exit_code, 2);
  EXPECT_EQ(RunCommand(absl::StrCat(GDN_MIN_CLIENT_BINARY, " --call_api=pigeon")).exit_code, 2);
  absl::StatusOr<std::unique_ptr<EchoProcess>> echo = EchoProcess::Start(GDN_ECHO_BINARY, kSmallShape);
  ASSERT_TRUE(echo.ok()) << echo.status();
  const CommandResult r = RunCommand(
      absl::StrCat(GDN_MIN_CLIENT_BINARY, " --server=", (*echo)->address(), " --sessions=0"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--sessions"));
}

}  // namespace
}  // namespace gdn::echo::testing
