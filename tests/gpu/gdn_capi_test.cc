// kernels/capi: the C ABI on staged device buffers gives the oracle's
// answer, and reports bad arguments with a code and a message.
#include "kernels/capi/gdn_capi.h"

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {

gdn_capi_config ToConfig(const GdnOptions& o) {
  gdn_capi_config c{};
  c.num_qk_heads = o.shape.num_qk_heads;
  c.num_v_heads = o.shape.num_v_heads;
  c.head_dim_k = o.shape.head_dim_k;
  c.head_dim_v = o.shape.head_dim_v;
  c.input_dtype = static_cast<int32_t>(o.input_dtype);
  c.state_dtype = static_cast<int32_t>(o.state_dtype);
  c.gating = static_cast<int32_t>(o.gating);
  c.l2_norm_qk = o.l2_norm_qk ? 1 : 0;
  c.scale = o.scale;
  return c;
}

gdn_capi_args ToArgs(const GdnParams& p) {
  gdn_capi_args a{};
  a.num_seqs = p.num_seqs;
  a.total_tokens = p.total_tokens;
  a.cu_seqlens = p.cu_seqlens;
  a.cu_seqlens_host = p.cu_seqlens_host;
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.o = p.o;
  a.g = p.g;
  a.beta = p.beta;
  a.a = p.a;
  a.b = p.b;
  a.A_log = p.A_log;
  a.dt_bias = p.dt_bias;
  a.pool_base = p.pool.base;
  a.page_bytes = p.pool.page_bytes;
  a.num_pages = p.pool.num_pages;
  a.initial_pages = p.initial_pages;
  a.final_pages = p.final_pages;
  return a;
}

TEST_F(CudaBackendTest, CapiDecodeAndPrefillMatchOracle) {
  for (bool prefill : {false, true}) {
    GdnOptions options;
    options.shape = {2, 4, 128, 64};
    options.state_dtype = prefill ? StateDType::kF32 : StateDType::kBF16;
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat("seed ", seed, prefill ? " prefill" : " decode"));
    const std::vector<int> lens = prefill ? std::vector<int>{70, 3} : std::vector<int>{1, 8, 2};
    const oracle::Inputs inputs = testing::MakeRandomInputs(options, lens, seed, true);
    auto call = testing::StagedCall::Create(*backend_, options, inputs);
    ASSERT_TRUE(call.ok()) << call.status();
    const gdn_capi_config config = ToConfig(options);
    const gdn_capi_args args = ToArgs((*call)->params());
    EXPECT_EQ(gdn_page_bytes(&config), (*call)->params().pool.page_bytes);
    ASSERT_TRUE(backend_->Synchronize().ok());  // staging copies done before the C call
    const int rc = prefill ? gdn_prefill(&config, &args, nullptr)
                           : gdn_decode(&config, &args, nullptr);
    ASSERT_EQ(rc, GDN_CAPI_OK) << gdn_last_error();
    ASSERT_TRUE(backend_->Synchronize().ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto got = (*call)->Fetch();
    ASSERT_TRUE(got.ok()) << got.status();
    const oracle::Outputs want = oracle::Run(options, inputs);
    const auto o_err = testing::Compare(got->o.data(), want.o.data(), want.o.size());
    EXPECT_LE(o_err.max_abs_rel, OutputTolerance(options)) << testing::ToString(o_err);
    for (size_t i = 0; i < lens.size(); ++i) {
      const auto s_err = testing::Compare(got->final_states[i].data(),
                                          want.final_states[i].data(),
                                          want.final_states[i].size());
      EXPECT_LE(s_err.max_abs_rel, StateTolerance(options)) << testing::ToString(s_err);
    }
  }
}

// gdn_decode_variant with forced variants and with GDN_DECODE_PDL (the
// programmatic-dependent-launch bit) gives the oracle's answers too.
TEST_F(CudaBackendTest, CapiDecodeVariantsWithPdlMatchOracle) {
  for (int code : {1 | GDN_DECODE_PDL, 4 | GDN_DECODE_PDL, 4, 1, 0 | GDN_DECODE_PDL}) {
    GdnOptions options;
    options.shape = {2, 4, 128, 128};
    options.state_dtype = StateDType::kBF16;
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat("seed ", seed, " code ", code));
    const std::vector<int> lens = {1, 8, 2, 5};
    const oracle::Inputs inputs = testing::MakeRandomInputs(options, lens, seed, true);
    auto call = testing::StagedCall::Create(*backend_, options, inputs);
    ASSERT_TRUE(call.ok()) << call.status();
    const gdn_capi_config config = ToConfig(options);
    const gdn_capi_args args = ToArgs((*call)->params());
    ASSERT_TRUE(backend_->Synchronize().ok());
    ASSERT_EQ(gdn_decode_variant(&config, &args, nullptr, code), GDN_CAPI_OK) << gdn_last_error();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto got = (*call)->Fetch();
    ASSERT_TRUE(got.ok()) << got.status();
    const oracle::Outputs want = oracle::Run(options, inputs);
    const auto o_err = testing::Compare(got->o.data(), want.o.data(), want.o.size());
    EXPECT_LE(o_err.max_abs_rel, OutputTolerance(options)) << testing::ToString(o_err);
    for (size_t i = 0; i < lens.size(); ++i) {
      const auto s_err = testing::Compare(got->final_states[i].data(),
                                          want.final_states[i].data(),
                                          want.final_states[i].size());
      EXPECT_LE(s_err.max_abs_rel, StateTolerance(options)) << testing::ToString(s_err);
    }
  }
}

// gdn_prefill routes as the cuda backend does (bf16, >= 64 tokens per
// sequence on average: the chunked kernel); gdn_prefill_variant and
// gdn_chunked_prefill_tuned force a kernel / the chunked kernel's knobs.
// Chunked answers carry bf16 tensor-core roundings (tests/gpu/chunked_prefill_test.cc).
TEST_F(CudaBackendTest, CapiPrefillRoutesAndForcesKernels) {
  GdnOptions options;
  options.shape = {2, 4, 128, 128};
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  const std::vector<int> lens = {300, 257, 65};
  const oracle::Inputs inputs = testing::MakeRandomInputs(options, lens, seed, true);
  const oracle::Outputs want = oracle::Run(options, inputs);
  const gdn_capi_config config = ToConfig(options);
  struct Case {
    const char* name;
    bool chunked;
    std::function<int(const gdn_capi_args*)> call;
  };
  std::vector<Case> cases = {
      {"gdn_prefill (routed)", true, [&](const gdn_capi_args* a) { return gdn_prefill(&config, a, nullptr); }},
      {"variant 2 (chunked)", true,
       [&](const gdn_capi_args* a) { return gdn_prefill_variant(&config, a, nullptr, 2); }},
      {"variant 1 (recurrent)", false,
       [&](const gdn_capi_args* a) { return gdn_prefill_variant(&config, a, nullptr, 1); }},
      {"tuned v_tile 64, kernel 1 variant 4", true,
       [&](const gdn_capi_args* a) { return gdn_chunked_prefill_tuned(&config, a, nullptr, 64, 3, 4, -1); }},
      {"tuned v_tile 16, default kernel 1", true,
       [&](const gdn_capi_args* a) { return gdn_chunked_prefill_tuned(&config, a, nullptr, 16, 3, -1, -1); }},
      {"tuned v_tile 32, kernel 1 code 4", true,
       [&](const gdn_capi_args* a) { return gdn_chunked_prefill_tuned(&config, a, nullptr, 32, 3, 4, -1); }},
      {"tuned v_tile 64, kernel 2 variant 4 (split)", true,
       [&](const gdn_capi_args* a) { return gdn_chunked_prefill_tuned(&config, a, nullptr, 64, 3, -1, 4); }},
      {"tuned v_tile 16, kernel 2 variant 5 (fused)", true,
       [&](const gdn_capi_args* a) { return gdn_chunked_prefill_tuned(&config, a, nullptr, 16, 3, -1, 5); }},
      {"tuned v_tile 32, kernel 2 variant 0 (auto)", true,
       [&](const gdn_capi_args* a) { return gdn_chunked_prefill_tuned(&config, a, nullptr, 32, 3, -1, 0); }},
      {"stages 1 then 2, split kernel 2", true,
       [&](const gdn_capi_args* a) {
         const int rc = gdn_chunked_prefill_tuned(&config, a, nullptr, 0, 1, -1, 4);
         return rc != GDN_CAPI_OK ? rc : gdn_chunked_prefill_tuned(&config, a, nullptr, 0, 2, -1, 4);
       }},
      {"stages 1 then 2", true,
       [&](const gdn_capi_args* a) {
         const int rc = gdn_chunked_prefill_tuned(&config, a, nullptr, 0, 1, -1, -1);
         return rc != GDN_CAPI_OK ? rc : gdn_chunked_prefill_tuned(&config, a, nullptr, 0, 2, -1, -1);
       }},
      {"tuned state_variant 7 (v7 forced)", true,
       [&](const gdn_capi_args* a) { return gdn_chunked_prefill_tuned(&config, a, nullptr, 0, 3, -1, 7); }},
  };
  // v8 forced (state_variant 8, ChunkedGeneration::kV8): compute capability
  // 9.0 only (elsewhere FailedPrecondition, 9).
  int device = 0, major = 0, minor = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), cudaSuccess);
  if (major == 9 && minor == 0) {
    cases.push_back({"tuned state_variant 8 (v8 forced)", true, [&](const gdn_capi_args* a) {
                       return gdn_chunked_prefill_tuned(&config, a, nullptr, 0, 3, -1, 8);
                     }});
    cases.push_back({"stages 1 then 2, v8", true, [&](const gdn_capi_args* a) {
                       const int rc = gdn_chunked_prefill_tuned(&config, a, nullptr, 0, 1, -1, 8);
                       return rc != GDN_CAPI_OK
                                  ? rc
                                  : gdn_chunked_prefill_tuned(&config, a, nullptr, 0, 2, -1, 8);
                     }});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto call = testing::StagedCall::Create(*backend_, options, inputs);
    ASSERT_TRUE(call.ok()) << call.status();
    const gdn_capi_args args = ToArgs((*call)->params());
    ASSERT_TRUE(backend_->Synchronize().ok());
    ASSERT_EQ(c.call(&args), GDN_CAPI_OK) << gdn_last_error();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto got = (*call)->Fetch();
    ASSERT_TRUE(got.ok()) << got.status();
    const double o_tol = c.chunked ? 1e-2 : OutputTolerance(options);
    const double s_tol = c.chunked ? 1e-2 : StateTolerance(options);
    const auto o_err = testing::Compare(got->o.data(), want.o.data(), want.o.size());
    EXPECT_EQ(o_err.nonfinite, 0);
    EXPECT_LE(o_err.max_abs_rel, o_tol) << testing::ToString(o_err);
    for (size_t i = 0; i < lens.size(); ++i) {
      const auto s_err = testing::Compare(got->final_states[i].data(),
                                          want.final_states[i].data(),
                                          want.final_states[i].size());
      EXPECT_LE(s_err.max_abs_rel, s_tol) << "state " << i << ": " << testing::ToString(s_err);
    }
  }
  EXPECT_GT(gdn_prefill_workspace_bytes(nullptr), 0);
}

TEST_F(CudaBackendTest, CapiReportsBadArguments) {
  GdnOptions options;
  options.shape = {2, 4, 64, 64};
  const oracle::Inputs inputs = testing::MakeRandomInputs(options, {2, 9}, FreshSeed(), true);
  auto call = testing::StagedCall::Create(*backend_, options, inputs);
  ASSERT_TRUE(call.ok()) << call.status();
  gdn_capi_config config = ToConfig(options);
  const gdn_capi_args args = ToArgs((*call)->params());
  // The state pass alone on a stream whose launcher has no workspace yet: no
  // kernel 1 tiles to read, refused (9, FailedPrecondition) before any launch.
  cudaStream_t fresh = nullptr;
  ASSERT_EQ(cudaStreamCreate(&fresh), cudaSuccess);
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, fresh, 0, 2, -1, -1), 9);
  EXPECT_NE(std::string(gdn_last_error()).find("state pass alone"), std::string::npos)
      << gdn_last_error();
  EXPECT_EQ(gdn_prefill_workspace_bytes(fresh), 0);
  ASSERT_EQ(cudaStreamDestroy(fresh), cudaSuccess);
  // 9 tokens is too many for decode.
  EXPECT_EQ(gdn_decode(&config, &args, nullptr), 3);
  EXPECT_NE(std::string(gdn_last_error()).find("tokens"), std::string::npos) << gdn_last_error();
  config.head_dim_v = 96;
  EXPECT_EQ(gdn_prefill(&config, &args, nullptr), 3);
  EXPECT_NE(std::string(gdn_last_error()).find("head_dim_v"), std::string::npos)
      << gdn_last_error();
  EXPECT_EQ(gdn_page_bytes(&config), 0);
  config.head_dim_v = 64;
  EXPECT_EQ(gdn_decode_variant(&config, &args, nullptr, 7), 3);
  // Decode variants 2 (large) and 5 (deep) were removed (issue 22).
  EXPECT_EQ(gdn_decode_variant(&config, &args, nullptr, 2), 3);
  EXPECT_EQ(gdn_decode_variant(&config, &args, nullptr, 5), 3);
  EXPECT_EQ(gdn_decode_variant(&config, &args, nullptr, 5 | GDN_DECODE_PDL), 3);
  EXPECT_EQ(gdn_prefill_variant(&config, &args, nullptr, 3), 3);
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 48, 3, -1, -1), 3);
  EXPECT_NE(std::string(gdn_last_error()).find("v_tile"), std::string::npos) << gdn_last_error();
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 0, 0, -1, -1), 3);
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 0, 3, 5, -1), 3);
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 0, 3, -1, 6), 3);
  EXPECT_NE(std::string(gdn_last_error()).find("state_variant"), std::string::npos)
      << gdn_last_error();
  // v8 forced where it cannot run (K = V = 64 here; or with a V tile):
  // InvalidArgument before any launch, on any device.
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 0, 3, -1, 8), 3);
  EXPECT_NE(std::string(gdn_last_error()).find("v8"), std::string::npos) << gdn_last_error();
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 32, 3, -1, 8), 3);
  // v8's span path (9, 900 + P for P in 2 .. 64): refused here like v8, and
  // span counts outside 2 .. 64 are not codes.
  for (int code : {9, 902, 964}) {
    EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 0, 3, -1, code), 3) << code;
    EXPECT_NE(std::string(gdn_last_error()).find("v8"), std::string::npos) << gdn_last_error();
  }
  for (int code : {900, 901, 965}) {
    EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 0, 3, -1, code), 3) << code;
    EXPECT_NE(std::string(gdn_last_error()).find("state_variant"), std::string::npos)
        << gdn_last_error();
  }
  // Kernel-2 variants 1 - 3 were removed.
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 0, 3, -1, 1), 3);
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 0, 3, -1, 3), 3);
  // Kernel-1 codes 0 - 3 were removed (3, fp32 merges, in issue 22).
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 0, 3, 3, -1), 3);
  EXPECT_NE(std::string(gdn_last_error()).find("prep_variant"), std::string::npos)
      << gdn_last_error();
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 0, 3, 0, -1), 3);
  EXPECT_EQ(gdn_chunked_prefill_tuned(&config, &args, nullptr, 0, 3, 2, -1), 3);
  // fp32 inputs: the chunked kernel is not compiled for them (issue 22);
  // forcing it is refused, gdn_prefill routes them to the recurrent kernel.
  {
    gdn_capi_config fp32_config = config;
    fp32_config.input_dtype = 0;  // fp32
    EXPECT_EQ(gdn_prefill_variant(&fp32_config, &args, nullptr, 2), 3);
    EXPECT_NE(std::string(gdn_last_error()).find("input_dtype"), std::string::npos)
        << gdn_last_error();
  }
  config.head_dim_k = 96;  // the recurrent kernels refuse it too (ValidateOptions)
  EXPECT_EQ(gdn_prefill_variant(&config, &args, nullptr, 2), 3);
}

}  // namespace
}  // namespace gdn::gpu_test
