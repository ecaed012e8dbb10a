// Prefix reuse through the whole service on the cuda backend: a prompt
// prefilled keeping a state every 64 tokens (in 64-token chunks: kept states
// copied at chunk ends; in one chunk: written by the kernel, recurrent for
// fp32 activations, chunked for bf16), forks at every kept position
// continuing exactly from the prefix, against the float64 oracle.
#include <memory>
#include <string>
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

TEST(ServerCudaPrefixTest, ForksAtEveryKeptPositionMatchTheOracle) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int64_t batch_tokens : {64, 512}) {
      ServerConfig config = testing::SmallServerConfig();
      config.backend.kind = BackendKind::kCuda;
      config.options.input_dtype = dtype;
      config.max_batch_tokens = batch_tokens;
      testing::ServerHarness harness(config);
      const GdnOptions options = harness.config().options;
      const uint64_t seed = testing::FreshSeed();
      SCOPED_TRACE(absl::StrCat("seed ", seed, " ", DescribeOptions(options), " batch ",
                                batch_tokens));
      const double tolerance = dtype == DType::kF32 ? 1e-3 : 1e-2;
      harness.CreateSession("p");
      const oracle::Inputs prompt = testing::MakeRandomInputs(options, {300}, seed, false);
      for (int layer = 0; layer < 2; ++layer) {
        gdn::v1::ForwardRequest request =
            testing::BuildForwardRequest(options, layer, {{"p", 0}}, prompt);
        request.mutable_sequences(0)->set_checkpoint_interval(64);
        gdn::v1::ForwardResponse response;
        const grpc::Status status = harness.Forward(request, &response);
        ASSERT_TRUE(status.ok()) << status.error_message();
      }
      for (int64_t at : {64, 128, 192, 256}) {
        const std::string child = absl::StrCat("c", at);
        grpc::ClientContext context;
        gdn::v1::ForkSessionRequest fork;
        fork.set_parent_id("p");
        fork.set_child_id(child);
        fork.set_at_position(at);
        gdn::v1::ForkSessionResponse forked;
        ASSERT_TRUE(harness.stub().ForkSession(&context, fork, &forked).ok()) << at;
        const oracle::Inputs next = testing::MakeRandomInputs(options, {3}, seed + at, false);
        for (int layer = 0; layer < 2; ++layer) {
          testing::OracleModel model(options);
          model.Apply(layer, {child},
                      testing::SliceSequence(options, prompt, 0, 0, static_cast<int>(at), {}));
          const std::vector<double> expected = model.Apply(layer, {child}, next);
          gdn::v1::ForwardResponse response;
          const grpc::Status status = harness.Forward(
              testing::BuildForwardRequest(options, layer, {{child, at}}, next), &response);
          ASSERT_TRUE(status.ok()) << status.error_message();
          EXPECT_LT(testing::MaxRelError(response.o(), expected), tolerance)
              << "at " << at << " layer " << layer;
        }
      }
    }
  }
}

}  // namespace
}  // namespace gdn
