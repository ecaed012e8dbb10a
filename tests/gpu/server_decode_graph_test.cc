// The whole service on the cuda backend with --decode_graphs on and off:
// the same random decode calls (1, 3, 17, 64, ... sessions, 1..8 tokens,
// two layers) must match the float64 oracle step by step and each other,
// and the metrics must show the graphs (captures per bucket, one replay per
// batch) or their absence.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/decode_runner.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "proto/tensor_codec.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"
#include "tests/server/test_random.h"
#include "kernels/testing/error_stats.h"

namespace gdn {
namespace {

constexpr int kSessions = 64;
constexpr double kTolerance = 1e-3;  // fp32 activations and states

ServerConfig CudaConfig(bool graphs) {
  ServerConfig c = testing::SmallServerConfig();
  c.backend.kind = BackendKind::kCuda;
  c.max_batch_tokens = 1024;  // 64 sessions x 8 tokens in one decode batch
  c.max_message_bytes = 16 << 20;
  c.decode_graphs = graphs;
  return c;
}

struct RunResult {
  std::vector<std::vector<float>> o;  // per step
  double captures = 0, replays = 0, direct = 0, padding = 0;
  int steps = 0;
  std::vector<int> buckets;
};

RunResult RunSteps(bool graphs, uint64_t seed) {
  RunResult result;
  testing::ServerHarness harness(CudaConfig(graphs));
  const GdnOptions options = harness.config().options;
  testing::OracleModel oracle(options);
  std::vector<std::string> ids;
  for (int i = 0; i < kSessions; ++i) {
    ids.push_back(absl::StrCat("s", i));
    harness.CreateSession(ids.back());
  }
  std::map<std::pair<std::string, int>, int64_t> positions;
  std::mt19937_64 rng(seed);
  const int sizes[] = {1, 3, 17, 64, 2, 33, 5, 64, 1, 9, 17, 3, 64, 1, 40, 8};
  for (int round = 0; round < 2; ++round) {
    for (int n : sizes) {
      SCOPED_TRACE(absl::StrCat("graphs ", graphs, " step ", result.steps, " n=", n));
      const int layer = static_cast<int>(rng() % 2);
      std::vector<std::string> batch = ids;
      std::shuffle(batch.begin(), batch.end(), rng);
      batch.resize(n);
      std::vector<int> lens(n);
      for (int& l : lens) l = rng() % 3 == 0 ? 1 + static_cast<int>(rng() % kMaxDecodeTokens) : 1;
      const oracle::Inputs inputs = testing::MakeRandomInputs(options, lens, rng(), false);
      std::vector<testing::SeqSpec> specs;
      for (const std::string& id : batch) specs.push_back({id, positions[{id, layer}]});
      const std::vector<double> expected = oracle.Apply(layer, batch, inputs);
      gdn::v1::ForwardResponse response;
      const grpc::Status status = harness.Forward(
          testing::BuildForwardRequest(options, layer, specs, inputs), &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      if (!status.ok()) return result;
      for (int i = 0; i < n; ++i) positions[{batch[i], layer}] += lens[i];
      EXPECT_LT(testing::MaxRelError(response.o(), expected), kTolerance);
      result.o.push_back(wire::ToFloats(response.o()));
      result.buckets.push_back(DecodeBucket(n, static_cast<int32_t>(
                                                   harness.config().max_batch_tokens)));
      ++result.steps;
    }
  }
  const std::string body = testing::ScrapeMetrics(harness.server().metrics_port());
  result.captures = testing::MetricValue(body, "gdn_decode_graph_captures_total", {});
  result.replays = testing::MetricValue(body, "gdn_decode_graph_replays_total", {});
  result.direct = testing::MetricValue(body, "gdn_decode_direct_runs_total", {});
  result.padding = testing::MetricValue(body, "gdn_decode_padding_sequences_total", {});
  std::printf("[decode_graphs=%d] %d steps: %.0f captures, %.0f replays, %.0f direct, "
              "%.0f padding sequences\n",
              graphs, result.steps, result.captures, result.replays, result.direct,
              result.padding);
  return result;
}

TEST(ServerDecodeGraphTest, GraphedDecodeMatchesOracleAndUngraphedServer) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = testing::FreshSeed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  const RunResult graphed = RunSteps(true, seed);
  const RunResult direct = RunSteps(false, seed);
  ASSERT_EQ(graphed.steps, 32);
  ASSERT_EQ(direct.steps, 32);
  for (int s = 0; s < graphed.steps; ++s) {
    std::vector<double> ref(direct.o[s].begin(), direct.o[s].end());
    EXPECT_LT(testing::Compare(graphed.o[s].data(), ref.data(), ref.size()).max_abs_rel,
              kTolerance)
        << "step " << s;
  }
  // One decode batch per call: a graph launch each; at least one capture
  // per bucket, more while the engine's staging buffers still grow (a moved
  // buffer recaptures: decode_runner.h).
  std::vector<int> buckets = graphed.buckets;
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  EXPECT_EQ(graphed.replays, graphed.steps);
  EXPECT_GE(graphed.captures, static_cast<double>(buckets.size()));
  EXPECT_LT(graphed.captures, graphed.steps);
  EXPECT_EQ(graphed.direct, 0);
  EXPECT_GT(graphed.padding, 0);
  EXPECT_EQ(direct.captures, 0);
  EXPECT_EQ(direct.replays, 0);
  EXPECT_EQ(direct.direct, direct.steps);
  EXPECT_EQ(direct.padding, 0);
}

}  // namespace
}  // namespace gdn
