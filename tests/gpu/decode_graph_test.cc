// kernels/cuda/decode_graph: a captured decode replays with new staging
// contents (activations, token mix, pages) and matches the oracle each time;
// other staging pointers are refused.
#include "kernels/cuda/decode_graph.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dtype_convert.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {

TEST_F(CudaBackendTest, DecodeGraphReplaysNewStagingContents) {
  GdnOptions options;
  options.shape = {4, 8, 128, 128};
  options.input_dtype = DType::kBF16;
  options.state_dtype = StateDType::kBF16;
  options.gating = GatingMode::kFused;
  auto cache = cuda::DecodeGraphCache::Create(*backend_, options);
  ASSERT_TRUE(cache.ok()) << cache.status();

  // The bucket: 6 sequences of 8 tokens staged; replays use fewer tokens
  // per sequence (the graph reads cu_seqlens from the device).
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937_64 rng(seed);
  const std::vector<int> bucket_lens(6, kMaxDecodeTokens);
  auto call = testing::StagedCall::Create(
      *backend_, options, testing::MakeRandomInputs(options, bucket_lens, rng(), true));
  ASSERT_TRUE(call.ok()) << call.status();
  GdnParams params = (*call)->params();  // the fixed staging buffers
  std::vector<int32_t> cu_host(7);

  for (int replay = 0; replay < 3; ++replay) {
    std::vector<int> lens(6);
    for (int& l : lens) l = 1 + static_cast<int>(rng() % kMaxDecodeTokens);
    oracle::Inputs in = testing::MakeRandomInputs(options, lens, rng(), true);
    // Stage: new activations, cu_seqlens and initial states into the same
    // buffers and pages.
    const size_t esize = DTypeSize(options.input_dtype);
    auto stage = [&](const void* dst, const std::vector<float>& values, bool convert) {
      std::vector<uint8_t> bytes(values.size() * (convert ? esize : 4));
      if (convert) {
        ConvertFromFloat(values.data(), values.size(), options.input_dtype, bytes.data());
      } else {
        std::memcpy(bytes.data(), values.data(), bytes.size());
      }
      ASSERT_TRUE(backend_->CopyToDevice(const_cast<void*>(dst), bytes.data(), bytes.size()).ok());
      ASSERT_TRUE(backend_->Synchronize().ok());
    };
    stage(params.q, in.q, true);
    stage(params.k, in.k, true);
    stage(params.v, in.v, true);
    stage(params.a, in.a, false);
    stage(params.b, in.b, false);
    stage(params.A_log, in.A_log, false);
    stage(params.dt_bias, in.dt_bias, false);
    std::memcpy(cu_host.data(), in.cu_seqlens.data(), 7 * sizeof(int32_t));
    ASSERT_TRUE(backend_->CopyToDevice(const_cast<int32_t*>(params.cu_seqlens), cu_host.data(),
                                       7 * sizeof(int32_t)).ok());
    const size_t page = params.pool.page_bytes;
    for (int i = 0; i < 6; ++i) {
      std::vector<uint16_t> bits(in.initial_states[i].size());
      for (size_t e = 0; e < bits.size(); ++e) bits[e] = FloatToBf16(in.initial_states[i][e]);
      char* dst = static_cast<char*>(params.pool.base) + page * (*call)->initial_pages()[i];
      ASSERT_TRUE(backend_->CopyToDevice(dst, bits.data(), bits.size() * 2).ok());
    }
    ASSERT_TRUE(backend_->Synchronize().ok());
    params.cu_seqlens_host = cu_host.data();
    params.total_tokens = cu_host[6];

    ASSERT_TRUE((*cache)->Run(params).ok());
    ASSERT_TRUE(backend_->Synchronize().ok());
    EXPECT_EQ((*cache)->num_graphs(), 1);
    // Read o and the final pages directly (the staged initial pages were
    // rewritten above, which StagedCall::Fetch would flag).
    auto got_o = ReadOutput(*backend_, options, params);
    ASSERT_TRUE(got_o.ok()) << got_o.status();
    const oracle::Outputs want = oracle::Run(options, in);
    ASSERT_EQ(got_o->size(), want.o.size());
    const auto o_err = testing::Compare(got_o->data(), want.o.data(), want.o.size());
    EXPECT_EQ(o_err.nonfinite, 0);
    EXPECT_LE(o_err.max_abs_rel, OutputTolerance(options)) << "replay " << replay;
    for (int i = 0; i < 6; ++i) {
      auto page = ReadPage(*backend_, options, params, (*call)->final_pages()[i]);
      ASSERT_TRUE(page.ok()) << page.status();
      const auto s_err = testing::Compare(page->data(), want.final_states[i].data(),
                                          want.final_states[i].size());
      EXPECT_LE(s_err.max_abs_rel, StateTolerance(options)) << "replay " << replay << " seq " << i;
    }
  }

  GdnParams moved = params;
  moved.o = const_cast<void*>(params.q);  // another staging buffer, same bucket
  EXPECT_EQ((*cache)->Run(moved).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(CudaBackendTest, DecodeGraphCacheNeedsTheCudaBackend) {
  class NotCuda : public Backend {
   public:
    absl::string_view name() const override { return "fake"; }
    std::string device_description() const override { return ""; }
    absl::Status Supports(const GdnOptions&) const override { return absl::OkStatus(); }
    absl::Status Decode(const GdnOptions&, const GdnParams&) override { return absl::OkStatus(); }
    absl::Status Prefill(const GdnOptions&, const GdnParams&) override { return absl::OkStatus(); }
    absl::StatusOr<void*> Allocate(size_t) override { return nullptr; }
    void Free(void*) override {}
    absl::StatusOr<void*> AllocateHost(size_t) override { return nullptr; }
    void FreeHost(void*) override {}
    absl::Status CopyToDevice(void*, const void*, size_t) override { return absl::OkStatus(); }
    absl::Status CopyToHost(void*, const void*, size_t) override { return absl::OkStatus(); }
    absl::Status CopyOnDevice(void*, const void*, size_t) override { return absl::OkStatus(); }
    absl::Status Synchronize() override { return absl::OkStatus(); }
    DeviceMemoryInfo MemoryInfo() const override { return {}; }
  } fake;
  EXPECT_EQ(cuda::DecodeGraphCache::Create(fake, GdnOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gdn::gpu_test
