// End to end, the tools: gdn-bench runs briefly against a real server and its
// JSON report has every field with numbers whose call counts match the
// server's metrics; gdn-cli drives a session through .npy files whose o
// matches the oracle, exports and imports it, and fails cleanly on bad flags.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/npy.h"
#include "kernels/testing/error_stats.h"
#include "tests/client/e2e/e2e_fixture.h"
#include "tests/client/e2e/metrics_scrape.h"
#include "tests/client/e2e/mini_json.h"

#ifndef GDN_BENCH_BINARY
#error "GDN_BENCH_BINARY must be defined by the build"
#endif
#ifndef GDN_CLI_BINARY
#error "GDN_CLI_BINARY must be defined by the build"
#endif

namespace gdn::e2e {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

RunResult RunTool(const std::string& binary, const std::vector<std::string>& args) {
  std::string command = binary;
  for (const std::string& a : args) absl::StrAppend(&command, " '", a, "'");
  command += " 2>&1";
  RunResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ToolsE2eTest : public E2eTest {};

TEST_F(ToolsE2eTest, BenchReportMatchesServerMetrics) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  const std::string before = ScrapeMetrics();
  const std::string json_path = ::testing::TempDir() + "/bench_report.json";
  // 4 sessions in 2 workers of 2 sessions per call, 2 rounds each, 2 of the
  // 3 layers: 2 workers x 2 rounds x 2 layers x (1 prefill + 3 decode) = 32.
  const RunResult r = RunTool(GDN_BENCH_BINARY,
                          {"--server=" + server_->grpc_address(), "--sessions=4",
                           "--sessions_per_call=2", "--prefill_tokens=20", "--decode_steps=3",
                           "--layers=2", "--rounds=2", "--seed=5", "--json_out=" + json_path});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("decode"), std::string::npos) << r.output;
  absl::StatusOr<JsonValue> report = ParseJson(ReadFile(json_path));
  ASSERT_TRUE(report.ok()) << report.status() << "\n" << ReadFile(json_path);

  auto number = [&](const std::vector<std::string>& path) {
    const JsonValue* v = report->Find(path);
    EXPECT_TRUE(v != nullptr && v->kind == JsonValue::Kind::kNumber)
        << absl::StrJoin(path, ".") << " missing or not a number";
    return v != nullptr ? v->number : -1.0;
  };
  EXPECT_EQ(number({"calls", "prefill"}), 8);
  EXPECT_EQ(number({"calls", "decode"}), 24);
  EXPECT_EQ(number({"calls", "total"}), 32);
  EXPECT_EQ(number({"calls", "failed"}), 0);
  EXPECT_EQ(number({"rounds_completed"}), 4);
  EXPECT_EQ(number({"config", "layers"}), 2);
  EXPECT_EQ(number({"server", "num_layers"}), 3);
  EXPECT_GT(number({"measured_s"}), 0);
  for (const char* field : {"calls_per_s", "tokens_per_s", "token_layers_per_s",
                            "prefill_tokens_per_s", "decode_tokens_per_s"}) {
    EXPECT_GT(number({"throughput", field}), 0) << field;
  }
  // token-layers: prefill 2 x 2 x 2 x 40, decode 2 x 2 x 2 x 3 x 2 per second.
  EXPECT_NEAR(number({"throughput", "token_layers_per_s"}) * number({"measured_s"}),
              320 + 48, 1.0);
  for (const char* phase : {"prefill", "decode"}) {
    const double p50 = number({"latency_ms", phase, "p50"});
    const double p90 = number({"latency_ms", phase, "p90"});
    const double p99 = number({"latency_ms", phase, "p99"});
    const double max = number({"latency_ms", phase, "max"});
    EXPECT_GT(p50, 0) << phase;
    EXPECT_LE(p50, p90) << phase;
    EXPECT_LE(p90, p99) << phase;
    EXPECT_LE(p99, max) << phase;
  }
  EXPECT_EQ(number({"latency_ms", "prefill", "count"}), 8);
  const JsonValue* errors = report->Find({"errors"});
  ASSERT_NE(errors, nullptr);
  EXPECT_TRUE(errors->object.empty());

  // The server counted exactly the RPCs the bench says it sent.
  const std::string after = ScrapeMetrics();
  auto server_count = [&](const std::string& method) {
    const std::map<std::string, std::string> labels = {{"method", method}, {"code", "OK"}};
    return SumSamples(after, "gdn_requests_total", labels) -
           SumSamples(before, "gdn_requests_total", labels);
  };
  EXPECT_EQ(server_count("Forward"), number({"rpcs", "Forward", "OK"}));
  EXPECT_EQ(server_count("Forward"), 32);
  EXPECT_EQ(server_count("CreateSession"), number({"rpcs", "CreateSession", "OK"}));
  EXPECT_EQ(server_count("CloseSession"), 8);
  // The sessions gauge follows the last CloseSession within the engine's
  // refresh (after each session command, and every second): wait for it.
  std::string gauges = after;
  for (int i = 0; i < 300 && SumSamples(gauges, "gdn_sessions") != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    gauges = ScrapeMetrics();
  }
  EXPECT_EQ(SumSamples(gauges, "gdn_sessions"), 0);
}

TEST_F(ToolsE2eTest, BenchRejectsBadFlags) {
  const RunResult r = RunTool(GDN_BENCH_BINARY, {"--sessions=3", "--sessions_per_call=2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("multiple"), std::string::npos) << r.output;
  EXPECT_NE(RunTool(GDN_BENCH_BINARY, {"--no_such_flag=1"}).exit_code, 0);
}

TEST_F(ToolsE2eTest, CliDrivesASessionThroughNpyFiles) {
  ASSERT_NO_FATAL_FAILURE(StartServer({{"activation_dtype", "bf16"}}));
  const std::string server = "--server=" + server_->grpc_address();
  const std::string dir = ::testing::TempDir();
  RunResult r = RunTool(GDN_CLI_BINARY, {server, "create", "--id=cli-session"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "cli-session\n");
  model_->AddSession("cli-session");

  // Two forwards at layer 1 from .npy files: q, k, v as fp32 files (rounded
  // to bf16 by the CLI), then as bf16 bit patterns; o written as bf16 bits.
  const int hqk = options_.shape.num_qk_heads, hv = options_.shape.num_v_heads;
  const int dk = options_.shape.head_dim_k, dv = options_.shape.head_dim_v;
  for (int call = 0; call < 2; ++call) {
    const int t = call == 0 ? 11 : 2;
    const oracle::Inputs in = model_->MakeInputs({t}, 60 + call);
    const client::NpyDType act = call == 0 ? client::NpyDType::kF32 : client::NpyDType::kBF16;
    const std::vector<std::pair<std::string, client::NpyArray>> files = {
        {"q", client::NpyFromFloats(act, {t, hqk, dk}, in.q)},
        {"k", client::NpyFromFloats(act, {t, hqk, dk}, in.k)},
        {"v", client::NpyFromFloats(act, {t, hv, dv}, in.v)},
        {"g", client::NpyFromFloats(client::NpyDType::kF32, {t, hv}, in.g)},
        {"beta", client::NpyFromFloats(client::NpyDType::kF32, {t, hv}, in.beta)}};
    std::vector<std::string> args = {server, "forward", "--id=cli-session", "--layer=1",
                                     "--out=" + dir + "/o.npy"};
    for (const auto& [name, array] : files) {
      const std::string path = absl::StrCat(dir, "/", name, ".npy");
      ASSERT_TRUE(client::WriteNpyFile(path, array).ok());
      args.push_back(absl::StrCat("--", name, "=", path));
    }
    r = RunTool(GDN_CLI_BINARY, args);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    absl::StatusOr<client::NpyArray> o = client::ReadNpyFile(dir + "/o.npy");
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->dtype, client::NpyDType::kBF16);
    EXPECT_EQ(o->shape, (std::vector<int64_t>{t, hv, dv}));
    const std::vector<double> ref = model_->Forward(1, {"cli-session"}, in);
    const std::vector<float> got = client::NpyToFloats(*o);
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_LT(testing::Compare(got.data(), ref.data(), ref.size()).max_abs_rel, OutputTolerance());
  }
  r = RunTool(GDN_CLI_BINARY, {server, "describe", "--id=cli-session"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("position: 13"), std::string::npos) << r.output;

  // Export to a directory, import under a new id, list, close.
  r = RunTool(GDN_CLI_BINARY, {server, "export", "--id=cli-session", "--out=" + dir + "/snaps/"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunTool(GDN_CLI_BINARY, {server, "import", "--file=" + dir + "/snaps/cli-session.gdnsnap",
                           "--id=cli-copy"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  model_->Fork("cli-session", "cli-copy");
  ASSERT_NO_FATAL_FAILURE(ExpectStatesMatch("cli-copy"));
  r = RunTool(GDN_CLI_BINARY, {server, "list"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("cli-copy"), std::string::npos);
  EXPECT_EQ(RunTool(GDN_CLI_BINARY, {server, "close", "--id=cli-copy"}).exit_code, 0);
  r = RunTool(GDN_CLI_BINARY, {server, "info"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("DTYPE_BF16"), std::string::npos) << r.output;

  // Errors: from the server (exit 1, code named) and from usage (exit 2).
  r = RunTool(GDN_CLI_BINARY, {server, "describe", "--id=cli-copy"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("NOT_FOUND"), std::string::npos) << r.output;
  r = RunTool(GDN_CLI_BINARY, {server, "close"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--id is required"), std::string::npos) << r.output;
  EXPECT_EQ(RunTool(GDN_CLI_BINARY, {server, "frobnicate"}).exit_code, 2);
  EXPECT_NE(RunTool(GDN_CLI_BINARY, {server, "list", "--bogus=1"}).exit_code, 0);
  r = RunTool(GDN_CLI_BINARY, {server, "forward", "--id=cli-session", "--layer=0", "--q=/nonexistent.npy",
                           "--k=x", "--v=y", "--g=z", "--beta=w", "--out=" + dir + "/o2.npy"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("nonexistent"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gdn::e2e
