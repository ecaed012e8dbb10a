// The gdn-bench binary: bad flags give a clear message and exit code 2; a
// sweep writes JSON, CSV and (with matplotlib) a PNG through plot_report.py.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/bench/bench_server.h"

namespace gdn::client::bench {
namespace {

using ::testing::HasSubstr;

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

RunResult RunCommand(const std::string& command) {
  RunResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

RunResult RunBench(const std::vector<std::string>& flags) {
  return RunCommand(absl::StrCat(GDN_BENCH_BINARY, " ", absl::StrJoin(flags, " ")));
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(BenchToolTest, BadFlagsExitWithCode2AndSayWhy) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--sessions=3", "--sessions_per_call=2"}, "multiple"},
      {{"--prefill_tokens=10:5"}, "--prefill_tokens"},
      {{"--decode_steps=zipf:1:2"}, "unknown distribution"},
      {{"--mode=open"}, "--rate"},
      {{"--mode=sideways"}, "--mode"},
      {{"--mode=open", "--rate=5", "--arrival=gamma", "--burstiness=0"}, "--burstiness"},
      {{"--sweep=qps:1,2"}, "concurrency"},
      {{"--sweep=concurrency:1,2", "--slo_p99_ms=5"}, "pick one"},
      {{"--slo_p99_ms=5", "--slo_phase=typing"}, "--slo_phase"},
      {{"--transport=carrier_pigeon"}, "--transport"},
      {{"--trace_file=/nonexistent/trace.jsonl"}, "--trace_file"},
      {{"--shared_prefix_tokens=8"}, "--fork_fanout"},
      {{"--plot=x.png"}, "--plot"},
  };
  for (const auto& [flags, message] : cases) {
    const RunResult r = RunBench(flags);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(flags, " ") << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(message)) << absl::StrJoin(flags, " ");
  }
  EXPECT_NE(RunBench({"--no_such_flag=1"}).exit_code, 0);
}

TEST(BenchToolTest, SweepWritesJsonCsvAndAPlot) {
  std::unique_ptr<GdnServer> server = testing::StartTinyServer();
  ASSERT_NE(server, nullptr);
  const std::string dir = ::testing::TempDir();
  const std::string json = dir + "/bench_sweep.json", csv = dir + "/bench_sweep.csv";
  const std::string png = dir + "/bench_sweep.png";
  std::remove(png.c_str());
  const bool have_matplotlib = RunCommand("python3 -c 'import matplotlib'").exit_code == 0;
  std::vector<std::string> flags = {"--server=" + server->grpc_address(),
                                    "--metrics=" + server->metrics_address(),
                                    "--sweep=concurrency:1,2", "--rounds=1", "--prefill_tokens=6",
                                    "--decode_steps=2", "--progress=false", "--json_out=" + json,
                                    "--csv_out=" + csv};
  if (have_matplotlib) flags.push_back("--plot=" + png);
  const RunResult r = RunBench(flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("sweep over concurrency"));
  EXPECT_THAT(ReadFile(json), HasSubstr("\"points\""));
  const std::string table = ReadFile(csv);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 3) << table;
  EXPECT_THAT(table, HasSubstr("decode_p99_ms"));
  if (!have_matplotlib) GTEST_SKIP() << "python3 matplotlib missing: PNG not checked";
  const std::string image = ReadFile(png);
  ASSERT_GT(image.size(), 1000u) << r.output;
  EXPECT_EQ(image.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace gdn::client::bench
