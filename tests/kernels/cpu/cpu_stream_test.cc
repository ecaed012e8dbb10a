// The cpu backend's BackendStream: gathers land every byte where the list
// says (any alignment), and a decode / prefill on a stream computes exactly
// what the backend's own entry points compute.
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn {
namespace {

TEST(CpuStreamTest, GatherCopiesEveryItemToItsOffset) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(1);
  absl::StatusOr<std::unique_ptr<BackendStream>> stream = backend->CreateStream(true);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::mt19937_64 rng(3);
  std::vector<char> source(300000);
  for (char& c : source) c = static_cast<char>(rng());
  std::vector<GatherCopy> items;
  std::vector<char> expected(400000, 0);
  uint64_t dst = 3;  // odd offsets and sizes on purpose
  for (uint64_t src : {0ul, 17ul, 4096ul, 100001ul}) {
    const uint64_t bytes = 70000 + src % 13;
    AppendGatherCopies(source.data() + src, dst, bytes, &items);
    std::memcpy(expected.data() + dst, source.data() + src, bytes);
    dst += bytes + 5;
  }
  for (const GatherCopy& c : items) EXPECT_LE(c.bytes, kGatherCopyMaxBytes);
  std::vector<char> out(expected.size(), 0);
  ASSERT_TRUE((*stream)->Gather(out.data(), items.data(), nullptr,
                                static_cast<int>(items.size())).ok());
  EXPECT_EQ(out, expected);
  absl::StatusOr<bool> done = (*stream)->Query();
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(*done);  // cpu work is done on return
}

TEST(CpuStreamTest, DecodeAndPrefillOnAStreamMatchTheBackendBitForBit) {
  std::unique_ptr<Backend> backend = CreateCpuBackend(2);
  absl::StatusOr<std::unique_ptr<BackendStream>> stream = backend->CreateStream(false);
  ASSERT_TRUE(stream.ok());
  GdnOptions options;
  options.shape = {2, 4, 64, 64};
  options.input_dtype = DType::kBF16;
  for (bool prefill : {false, true}) {
    const std::vector<int> lens = prefill ? std::vector<int>{70, 3} : std::vector<int>{1, 4, 8};
    const oracle::Inputs inputs = testing::MakeRandomInputs(options, lens, 11, true);
    const testing::EntryPoint entry =
        prefill ? testing::EntryPoint::kPrefill : testing::EntryPoint::kDecode;
    absl::StatusOr<testing::BackendOutputs> direct =
        testing::RunOnBackend(*backend, options, inputs, entry);
    ASSERT_TRUE(direct.ok()) << direct.status();
    absl::StatusOr<std::unique_ptr<testing::StagedCall>> staged =
        testing::StagedCall::Create(*backend, options, inputs);
    ASSERT_TRUE(staged.ok());
    const GdnParams& p = (*staged)->params();
    ASSERT_TRUE((prefill ? (*stream)->Prefill(options, p) : (*stream)->Decode(options, p)).ok());
    absl::StatusOr<testing::BackendOutputs> on_stream = (*staged)->Fetch();
    ASSERT_TRUE(on_stream.ok()) << on_stream.status();
    EXPECT_EQ(on_stream->o, direct->o);
    EXPECT_EQ(on_stream->final_states, direct->final_states);
  }
}

}  // namespace
}  // namespace gdn
