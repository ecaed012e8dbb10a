// gdn-bench --compare_echo against in-process gdn-echo servers (the raw echo
// standing for the server under test, the proto echo as the ceiling): both
// arms run the same workload in alternating turns and count exactly, the
// report gives both arms and their ratios (text and JSON); an echo of another
// shape is refused before anything runs; a request over the message limit is
// split into several RPCs without failing; the gdn-bench binary does the
// same from its flags.
#include "client/bench/compare_echo.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "bench/echo/echo_server.h"
#include "client/bench/report.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/bench/echo/echo_process.h"

namespace gdn::client::bench {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<echo::EchoServer> StartEcho(echo::EchoMode mode, int v_heads = 4) {
  echo::EchoOptions o;
  o.mode = mode;
  o.layers = 2;
  o.qk_heads = 2;
  o.v_heads = v_heads;
  o.head_dim_k = 16;
  o.head_dim_v = 8;
  o.transport.max_message_bytes = 8 << 20;
  absl::StatusOr<std::unique_ptr<echo::EchoServer>> s = echo::EchoServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

BenchConfig Workload(const std::string& server) {
  BenchConfig c;
  c.server = server;
  c.sessions = 2;
  c.sessions_per_call = 2;
  c.prefill_tokens = LengthSpec::Fixed(5);
  c.decode_steps = LengthSpec::Fixed(3);
  c.rounds = 2;
  c.progress = false;
  return c;
}

TEST(CompareEchoTest, BothArmsRunTheSameWorkloadInTurns) {
  std::unique_ptr<echo::EchoServer> server = StartEcho(echo::EchoMode::kRaw);
  std::unique_ptr<echo::EchoServer> ceiling = StartEcho(echo::EchoMode::kProto);
  ASSERT_TRUE(server && ceiling);
  absl::StatusOr<CompareEchoResult> r =
      RunCompareEcho(Workload(server->address()), ceiling->address(), /*turns=*/2);
  ASSERT_TRUE(r.ok()) << r.status();
  // Per turn ceil(2 rounds / 2) = 1 unit of 2 sessions over 2 layers: 2
  // prefill calls and 2 x 3 decode calls; two turns per arm.
  for (const BenchResult* arm : {&r->server, &r->echo}) {
    EXPECT_EQ(arm->measured.prefill().calls, 4);
    EXPECT_EQ(arm->measured.decode().calls, 12);
    EXPECT_EQ(arm->measured.failed_calls(), 0);
    EXPECT_EQ(arm->config.layers, 2);
  }
  EXPECT_EQ(r->echo.server.version(), "echo/proto");
  EXPECT_EQ(r->server.server.version(), "echo/raw");
  const std::string text = FormatCompareEchoText(*r);
  EXPECT_THAT(text, HasSubstr("compared with the echo"));
  EXPECT_THAT(text, HasSubstr("decode"));
  const std::string json = FormatJsonReport(r->server, nullptr, {{"compare_echo", CompareEchoJson(*r)}});
  for (const char* key : {"\"compare_echo\"", "\"p50_ratio\"", "\"p99_ratio\"", "\"echo_report\"",
                          "\"prefill\"", "\"turns\": 2"}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
}

TEST(CompareEchoTest, AnEchoOfAnotherShapeIsRefused) {
  std::unique_ptr<echo::EchoServer> server = StartEcho(echo::EchoMode::kRaw);
  std::unique_ptr<echo::EchoServer> other = StartEcho(echo::EchoMode::kProto, /*v_heads=*/8);
  ASSERT_TRUE(server && other);
  absl::StatusOr<CompareEchoResult> r = RunCompareEcho(Workload(server->address()), other->address(), 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("Hv 8"));
}

TEST(CompareEchoTest, RequestsOverTheLimitAreSplitIntoSeveralRpcs) {
  std::unique_ptr<echo::EchoServer> server = StartEcho(echo::EchoMode::kRaw);
  ASSERT_NE(server, nullptr);
  // Unary: one RPC per part; stream: the parts pipelined on the lane's stream.
  for (const bool stream : {false, true}) {
    BenchConfig c = Workload(server->address());
    c.stream = stream;
    c.sessions = c.sessions_per_call = 1;
    c.rounds = 1;
    c.prefill_tokens = LengthSpec::Fixed(1000);  // 224 bytes a token: ~219 KiB
    c.max_message_bytes = 100000;                // ~150 tokens a part
    absl::StatusOr<BenchResult> r = RunBench(c);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->measured.failed_calls(), 0) << stream;
    EXPECT_EQ(r->measured.prefill().calls, 2) << stream;
    EXPECT_GT(r->rpcs.Total(stream ? "ForwardStream" : "Forward"),
              r->measured.forward_calls() + 2 * 4)
        << stream;
    EXPECT_EQ(r->rpcs.Total(stream ? "Forward" : "ForwardStream"), 0) << stream;
  }
}

// --part_bytes: parts under the message limit, pipelined over the stream;
// refused for unary calls (they would go one after another).
TEST(CompareEchoTest, PartBytesSplitsUnderTheLimitOverTheStreamOnly) {
  std::unique_ptr<echo::EchoServer> server = StartEcho(echo::EchoMode::kRaw);
  ASSERT_NE(server, nullptr);
  BenchConfig c = Workload(server->address());
  c.stream = true;
  c.sessions = c.sessions_per_call = 1;
  c.rounds = 1;
  c.prefill_tokens = LengthSpec::Fixed(1000);  // ~219 KiB, under the 8 MiB limit
  c.part_bytes = 100000;                       // ~150 tokens a part
  absl::StatusOr<BenchResult> r = RunBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->measured.failed_calls(), 0);
  EXPECT_EQ(r->measured.prefill().calls, 2);
  EXPECT_GT(r->rpcs.Total("ForwardStream"), r->measured.forward_calls() + 2 * 4);

  c.stream = false;
  r = RunBench(c);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("--transport=stream"));
}

// --connections: a split call's parts over several connections at once
// (decode sessions: whole sequences; a prefill cut in parts stays on one
// connection, in order); refused for unary calls.
TEST(CompareEchoTest, ConnectionsSpreadPartsOverTheStreamOnly) {
  std::unique_ptr<echo::EchoServer> server = StartEcho(echo::EchoMode::kRaw);
  ASSERT_NE(server, nullptr);
  BenchConfig c = Workload(server->address());
  c.stream = true;
  c.sessions = c.sessions_per_call = 24;
  c.rounds = 1;
  c.prefill_tokens = LengthSpec::Fixed(40);  // ~9 KiB per session
  c.part_bytes = 100000;                     // ~4 sessions a part (64 KiB kept for the rest)
  c.connections = 3;
  absl::StatusOr<BenchResult> r = RunBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->measured.failed_calls(), 0);
  EXPECT_EQ(r->measured.prefill().calls, 2);
  EXPECT_EQ(r->measured.decode().calls, 2 * 3);
  // ~215 KiB of prefill in parts of ~34 KiB: at least 4 a call.
  EXPECT_GE(r->rpcs.Total("ForwardStream"), 2 * 4 + 2 * 3);

  c.sessions = c.sessions_per_call = 1;
  c.prefill_tokens = LengthSpec::Fixed(1000);  // one sequence cut in parts
  c.part_bytes = 100000;
  r = RunBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->measured.failed_calls(), 0);

  c.stream = false;
  c.part_bytes = 0;
  r = RunBench(c);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("--transport=stream"));
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(CompareEchoToolTest, TheBinaryReportsBothArms) {
  std::unique_ptr<echo::EchoServer> server = StartEcho(echo::EchoMode::kRaw);
  std::unique_ptr<echo::EchoServer> ceiling = StartEcho(echo::EchoMode::kProto);
  ASSERT_TRUE(server && ceiling);
  const std::string json = ::testing::TempDir() + "/compare_echo.json";
  std::remove(json.c_str());
  const echo::testing::CommandResult r = echo::testing::RunCommand(absl::StrCat(
      GDN_BENCH_BINARY, " --server=", server->address(), " --compare_echo=", ceiling->address(),
      " --compare_rounds=2 --sessions=2 --sessions_per_call=2 --prefill_tokens=4 --decode_steps=2",
      " --rounds=2 --progress=false --json_out=", json));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("compared with the echo"));
  const std::string j = ReadFile(json);
  EXPECT_THAT(j, HasSubstr("\"compare_echo\""));
  EXPECT_THAT(j, HasSubstr("\"p50_ratio\""));

  for (const char* bad : {" --compare_echo=x:1 --sweep=concurrency:1,2",
                          " --compare_echo=x:1 --compare_rounds=0"}) {
    const echo::testing::CommandResult b =
        echo::testing::RunCommand(absl::StrCat(GDN_BENCH_BINARY, bad));
    EXPECT_EQ(b.exit_code, 2) << bad << "\n" << b.output;
  }
}

}  // namespace
}  // namespace gdn::client::bench
