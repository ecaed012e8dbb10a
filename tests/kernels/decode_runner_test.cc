// kernels/decode_runner: the bucket and padding planning (pure), and the
// direct runner the cpu backend gets whatever the config says.
#include "kernels/decode_runner.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/oracle/gdn_oracle.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/error_stats.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn {
namespace {

TEST(DecodeBucketTest, PowersOfTwoCappedAtMax) {
  EXPECT_EQ(DecodeBucket(1, 8192), 1);
  EXPECT_EQ(DecodeBucket(2, 8192), 2);
  EXPECT_EQ(DecodeBucket(3, 8192), 4);
  EXPECT_EQ(DecodeBucket(17, 8192), 32);
  EXPECT_EQ(DecodeBucket(64, 8192), 64);
  EXPECT_EQ(DecodeBucket(65, 8192), 128);
  EXPECT_EQ(DecodeBucket(8192, 8192), 8192);
  // A max that is not a power of two is the top bucket itself.
  EXPECT_EQ(DecodeBucket(65, 100), 100);
  EXPECT_EQ(DecodeBucket(100, 100), 100);
  EXPECT_EQ(DecodeBucket(64, 100), 64);
  // Beyond the max (or empty): as is, run without a graph.
  EXPECT_EQ(DecodeBucket(101, 100), 101);
  EXPECT_EQ(DecodeBucket(0, 100), 0);
}

TEST(DecodeBucketTest, EveryBatchFitsItsBucketAndBucketsAreListed) {
  for (int32_t max_seqs : {1, 2, 3, 7, 64, 100, 1000}) {
    const std::vector<int32_t> buckets = DecodeBuckets(max_seqs);
    ASSERT_FALSE(buckets.empty());
    EXPECT_EQ(buckets.front(), 1);
    EXPECT_EQ(buckets.back(), max_seqs);
    for (size_t i = 1; i < buckets.size(); ++i) EXPECT_LT(buckets[i - 1], buckets[i]);
    for (int32_t n = 1; n <= max_seqs; ++n) {
      const int32_t b = DecodeBucket(n, max_seqs);
      EXPECT_GE(b, n);
      EXPECT_LE(b, max_seqs);
      EXPECT_LT(b, 2 * n) << "at most doubles: n=" << n;
      bool listed = false;
      for (int32_t x : buckets) listed |= x == b;
      EXPECT_TRUE(listed) << "bucket " << b << " of n=" << n << " max " << max_seqs;
    }
  }
}

TEST(AppendDecodePaddingTest, OneTokenZeroPageDiscardPage) {
  // Three real sequences of 2, 1, 8 tokens padded to a bucket of 8.
  std::vector<int32_t> cu = {0, 2, 3, 11, -7, -7, -7, -7, -7};
  std::vector<int32_t> initial = {5, kZeroStatePage, 9, -7, -7, -7, -7, -7};
  std::vector<int32_t> final_pages = {5, 6, 10, -7, -7, -7, -7, -7};
  const int32_t total = AppendDecodePadding(3, 8, kDiscardPage, cu.data(), initial.data(),
                                            final_pages.data());
  EXPECT_EQ(total, 16);
  EXPECT_EQ(cu, (std::vector<int32_t>{0, 2, 3, 11, 12, 13, 14, 15, 16}));
  EXPECT_EQ(initial, (std::vector<int32_t>{5, kZeroStatePage, 9, kZeroStatePage,
                                           kZeroStatePage, kZeroStatePage, kZeroStatePage,
                                           kZeroStatePage}));
  EXPECT_EQ(final_pages, (std::vector<int32_t>{5, 6, 10, kDiscardPage, kDiscardPage,
                                               kDiscardPage, kDiscardPage, kDiscardPage}));
}

TEST(AppendDecodePaddingTest, NothingToPad) {
  std::vector<int32_t> cu = {0, 4, 5};
  std::vector<int32_t> initial = {1, 2};
  std::vector<int32_t> final_pages = {1, 2};
  EXPECT_EQ(AppendDecodePadding(2, 2, kDiscardPage, cu.data(), initial.data(),
                                final_pages.data()),
            5);
  EXPECT_EQ(cu, (std::vector<int32_t>{0, 4, 5}));
  EXPECT_EQ(final_pages, (std::vector<int32_t>{1, 2}));
}

TEST(AppendDecodePaddingTest, DiscardPageIsOutsideAnyPool) {
  EXPECT_GT(kDiscardPage, 0);
  EXPECT_NE(kDiscardPage, kZeroStatePage);
  // num_pages is an int32: no pool has page kDiscardPage (ids < num_pages).
  EXPECT_EQ(kDiscardPage, std::numeric_limits<int32_t>::max());
}

TEST(CreateDecodeRunnerTest, CpuBackendRunsDirectlyEvenWithGraphsOn) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(1);
  ASSERT_NE(backend, nullptr);
  GdnOptions options;
  options.shape = {2, 4, 64, 64};
  options.input_dtype = DType::kF32;  // o not rounded: fp32 arithmetic only
  DecodeRunnerConfig config;
  config.use_graphs = true;
  config.max_seqs = 64;
  auto runner = CreateDecodeRunner(*backend, options, config);
  ASSERT_TRUE(runner.ok()) << runner.status();
  EXPECT_FALSE((*runner)->graphed());
  for (int32_t n : {1, 3, 17, 64, 65}) EXPECT_EQ((*runner)->PaddedSeqs(n), n);
  EXPECT_EQ((*runner)->stats().graph_captures, 0u);
  // Runs the batch as is, with the backend's numbers.
  const oracle::Inputs inputs = testing::MakeRandomInputs(options, {1, 3, 8}, 17, true);
  auto call = testing::StagedCall::Create(*backend, options, inputs);
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_TRUE((*runner)->Run((*call)->params()).ok());
  EXPECT_EQ((*runner)->stats().direct_runs, 1u);
  auto got = (*call)->Fetch();
  ASSERT_TRUE(got.ok()) << got.status();
  const oracle::Outputs want = oracle::Run(options, inputs);
  EXPECT_LE(testing::Compare(got->o.data(), want.o.data(), want.o.size()).max_abs_rel, 1e-4);
  // A bad config is refused.
  config.max_seqs = 0;
  EXPECT_EQ(CreateDecodeRunner(*backend, options, config).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gdn
