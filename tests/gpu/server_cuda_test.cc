// The whole service on the cuda backend against the float64 oracle: several
// client threads at once (each with sessions of its own), random decode
// calls of 1..8 tokens over 1..24 sessions and prefills long enough to be
// chunked over lanes, on two layers. Exercises the engine's lanes, the
// gather of many calls' inputs into one batch, cross-lane chunk ordering and
// the o runs of merged batches.
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/testing/gdn_test_inputs.h"
#include "tests/server/rpc/forward_request_builder.h"
#include "tests/server/server_harness.h"
#include "tests/server/test_random.h"

namespace gdn {
namespace {

constexpr double kTolerance = 1e-3;  // fp32 activations and states

void RunClient(testing::ServerHarness& harness, int client, uint64_t seed, int* calls) {
  const GdnOptions options = harness.config().options;
  testing::OracleModel oracle(options);
  std::vector<std::string> ids;
  for (int i = 0; i < 24; ++i) {
    ids.push_back(absl::StrCat("c", client, "-s", i));
    harness.CreateSession(ids.back());
  }
  std::map<std::pair<std::string, int>, int64_t> positions;
  std::mt19937_64 rng(seed);
  for (int step = 0; step < 24; ++step) {
    SCOPED_TRACE(absl::StrCat("client ", client, " step ", step));
    const int layer = static_cast<int>(rng() % 2);
    const bool prefill = rng() % 4 == 0;
    std::vector<std::string> batch = ids;
    std::shuffle(batch.begin(), batch.end(), rng);
    batch.resize(prefill ? 1 + rng() % 3 : 1 + rng() % 24);
    std::vector<int> lens(batch.size());
    for (int& l : lens) {
      l = prefill ? 65 + static_cast<int>(rng() % 300) : 1 + static_cast<int>(rng() % 8);
    }
    const oracle::Inputs inputs = testing::MakeRandomInputs(options, lens, rng(), false);
    std::vector<testing::SeqSpec> specs;
    for (const std::string& id : batch) specs.push_back({id, positions[{id, layer}]});
    const std::vector<double> expected = oracle.Apply(layer, batch, inputs);
    gdn::v1::ForwardResponse response;
    const grpc::Status status =
        harness.Forward(testing::BuildForwardRequest(options, layer, specs, inputs), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    for (size_t i = 0; i < batch.size(); ++i) positions[{batch[i], layer}] += lens[i];
    EXPECT_LT(testing::MaxRelError(response.o(), expected), kTolerance);
    ++*calls;
  }
}

TEST(ServerCudaTest, ConcurrentClientsMatchTheOracle) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  ServerConfig config = testing::SmallServerConfig();
  config.backend.kind = BackendKind::kCuda;
  config.max_batch_tokens = 128;  // prefills chunk over lanes
  config.max_message_bytes = 16 << 20;
  config.io_buffer_bytes = 256 << 20;
  testing::ServerHarness harness(config);
  const uint64_t seed = testing::FreshSeed();
  SCOPED_TRACE(absl::StrCat("GDN_TEST_SEED=", seed));
  std::vector<int> calls(4, 0);
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] { RunClient(harness, c, seed + c, &calls[c]); });
  }
  for (std::thread& t : clients) t.join();
  for (int c = 0; c < 4; ++c) EXPECT_EQ(calls[c], 24) << "client " << c;
}

}  // namespace
}  // namespace gdn
