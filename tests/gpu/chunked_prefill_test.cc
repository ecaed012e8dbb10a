// The chunked tensor-core prefill (kernels/cuda/chunked_prefill.h) against
// the float64 oracle: lengths around the chunk size, varlen mixes, K / V 64
// and 128, both state dtypes, fused gating, the in-kernel L2 norm, extreme
// gates, and a prefill continued by the cuda backend's decode. Every case
// goes through ChunkedPrefill's generation router (kAuto): these small
// shapes keep v7 (too few sequences x heads, or K / V 64), but for
// PrefillThenDecodeMatchesOracle, which runs both generations;
// chunked_prefill_route_test.cc covers the v8 side, and
// chunked_prefill_checkpoints_test.cc the prefix states of both.
//
// ChunkedOnlyBackend, the bars and the fixture: chunked_prefill_fixture.h.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/chunked_prefill.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "tests/gpu/chunked_prefill_fixture.h"
#include "tests/gpu/gpu_test_util.h"

namespace gdn::gpu_test {
namespace {
TEST_F(ChunkedPrefillTest, LengthsAroundTheChunkSizeForEveryHeadDim) {
  for (auto [k, v] : {std::pair{128, 128}, {64, 64}, {64, 128}, {128, 64}}) {
    for (int len : {1, 63, 64, 65, 1000, 4096}) {
      if (len == 4096 && (k != 128 || v != 128)) continue;  // oracle time
      ExpectPrefillMatches(Options(2, 4, k, v), {len}, /*random_initial_state=*/true);
    }
  }
}

TEST_F(ChunkedPrefillTest, VarlenMixesFromZeroAndStoredStates) {
  const std::vector<int> mix = {65, 1, 130, 64, 1000, 7, 257, 63, 2};
  for (bool init : {true, false}) {
    ExpectPrefillMatches(Options(2, 4, 128, 128), mix, init);
    ExpectPrefillMatches(Options(1, 2, 64, 64), mix, init);
  }
}

TEST_F(ChunkedPrefillTest, StateDtypesGatingNormAndInputDtypes) {
  const std::vector<int> lens = {300, 65, 1};
  for (StateDType st : {StateDType::kF32, StateDType::kBF16}) {
    for (GatingMode gating : {GatingMode::kDirect, GatingMode::kFused}) {
      for (bool l2 : {true, false}) {
        GdnOptions options = Options(2, 4, 128, 128);
        options.state_dtype = st;
        options.gating = gating;
        options.l2_norm_qk = l2;
        ExpectPrefillMatches(options, lens, true);
      }
    }
  }
  GdnOptions options = Options(2, 4, 128, 128);
  options.input_dtype = DType::kF16;
  ExpectPrefillMatches(options, lens, true);
  // fp32 inputs: not compiled for the chunked kernel (issue 22; the routing
  // gives them the recurrent kernel, RoutingPolicy below).
  options.input_dtype = DType::kF32;
  EXPECT_EQ(cuda::ChunkedPrefill::Supports(options).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ChunkedPrefillTest, ExtremeGates) {
  for (testing::GateProfile profile :
       {testing::GateProfile::kNoDecay, testing::GateProfile::kStrongDecay,
        testing::GateProfile::kBetaZero, testing::GateProfile::kBetaOne}) {
    ExpectPrefillMatches(Options(2, 4, 128, 128), {500, 64, 3}, true, profile);
    GdnOptions fused = Options(2, 4, 128, 128);
    fused.gating = GatingMode::kFused;
    ExpectPrefillMatches(fused, {200, 1}, true, profile);
  }
}

// Issue 21, defect 6: q/k rows whose fp32 sum of squares overflows (max|x|
// 1e20, 3e38) or underflows (1e-30) under the in-kernel L2 norm of kernel
// 1's phase 1 (and its raw q k^T, k k^T products).
TEST_F(ChunkedPrefillTest, HugeAndTinyQkRowsUnderTheL2Norm) {
  q_max_ = {0, 1e20f, 3e38f, 1e-30f, 2e19f};
  k_max_ = {1e30f, 0, 1e-30f, 3e38f, 1e20f};
  for (auto [k, v] : {std::pair{128, 128}, {64, 64}}) {
    ExpectPrefillMatches(Options(2, 4, k, v), {130, 65, 1}, true);
  }
  chunked_->Configure(0);
  q_max_.clear();
  k_max_.clear();
}

// fp16 inputs take fp16 operands in all three kernels (their own instances):
// every head-dim pair, every V tile in both kernel-2 forms, fused gating, bf16 state pages and the extreme gates, within the
// fp16 bars (about 5x tighter than bf16's).
TEST_F(ChunkedPrefillTest, Fp16InputsTakeFp16Operands) {
  const std::vector<int> lens = {300, 65, 1};
  for (auto [k, v] : {std::pair{128, 128}, {64, 64}, {64, 128}, {128, 64}}) {
    GdnOptions options = Options(2, 4, k, v);
    options.input_dtype = DType::kF16;
    ExpectPrefillMatches(options, lens, true);
  }
  GdnOptions options = Options(2, 4, 128, 128);
  options.input_dtype = DType::kF16;
  for (int v_tile : {16, 32, 64}) {
    for (cuda::ChunkedStatePass form : {cuda::ChunkedStatePass::kSplit,
                                        cuda::ChunkedStatePass::kFused}) {
      SCOPED_TRACE(absl::StrCat("v_tile ", v_tile, " kernel 2 form ", static_cast<int>(form)));
      chunked_->Configure(v_tile, form);
      ExpectPrefillMatches(options, lens, true);
    }
  }
  chunked_->Configure(0);
  GdnOptions fused = options;
  fused.gating = GatingMode::kFused;
  fused.state_dtype = StateDType::kBF16;
  ExpectPrefillMatches(fused, lens, true);
  for (testing::GateProfile profile :
       {testing::GateProfile::kNoDecay, testing::GateProfile::kStrongDecay,
        testing::GateProfile::kBetaZero, testing::GateProfile::kBetaOne}) {
    ExpectPrefillMatches(options, {500, 64, 3}, true, profile);
  }
  GdnOptions raw = options;
  raw.l2_norm_qk = false;
  ExpectPrefillMatches(raw, lens, true);
}

// All tokens of a sequence equal (bf16 and fp16 inputs): T enters W and U
// unrounded (chunk_prep_blocked.cuh); with T in bf16 this case measured
// 1.0e-2 max_abs_rel on outputs (FLA 7.8e-3, bench/results/2026-12-01-prefill-v6.md).
TEST_F(ChunkedPrefillTest, AllEqualTokens) {
  for (DType dt : {DType::kBF16, DType::kF16}) {
    GdnOptions options = Options(2, 4, 128, 128);
    options.input_dtype = dt;
    const testing::ErrorStats e =
        ExpectPrefillMatches(options, {1000, 130, 64}, true, testing::GateProfile::kRandom,
                             nullptr, /*equal_tokens=*/true);
    std::printf("all-equal tokens, %s inputs: o %s\n", std::string(DTypeName(dt)).c_str(),
                testing::ToString(e).c_str());
  }
}

// The grouped kernel 1 (one block per chunk and q/k head, looping over its
// G value heads): G = 1, 2, 4, 8, every head-dim pair, lengths around the
// chunk size and a varlen mix, fp32 and bf16 state.
TEST_F(ChunkedPrefillTest, GroupSizesOfTheGroupedKernel) {
  const std::vector<int> mix = {65, 1, 130, 64, 1000, 7, 257, 63, 2};
  for (auto [hqk, hv] : {std::pair{4, 4}, {2, 4}, {1, 4}, {1, 8}}) {
    for (auto [k, v] : {std::pair{128, 128}, {64, 64}, {64, 128}, {128, 64}}) {
      GdnOptions options = Options(hqk, hv, k, v);
      ExpectPrefillMatches(options, {1}, true);
      ExpectPrefillMatches(options, {63}, true);
      ExpectPrefillMatches(options, {65}, false);
      ExpectPrefillMatches(options, mix, true);
      options.state_dtype = StateDType::kBF16;
      ExpectPrefillMatches(options, {1000, 64}, true);
    }
  }
}

// Every V tile of the state pass (16, 32, 64: 4, 4, 8 warps) on the same
// kind of inputs (kernel 1 has one form since issue 22).
TEST_F(ChunkedPrefillTest, EveryVTile) {
  const std::vector<int> mix = {65, 1, 130, 64, 1000, 7, 257, 63, 2};
  for (int v_tile : {16, 32, 64}) {
    SCOPED_TRACE(absl::StrCat("v_tile ", v_tile));
    chunked_->Configure(v_tile);
    ExpectPrefillMatches(Options(2, 4, 128, 128), mix, true);
    ExpectPrefillMatches(Options(1, 2, 64, 64), {1000, 65}, true);
    GdnOptions fused = Options(2, 4, 128, 64);
    fused.gating = GatingMode::kFused;
    fused.state_dtype = StateDType::kBF16;
    ExpectPrefillMatches(fused, {200, 64}, true, testing::GateProfile::kStrongDecay);
  }
  chunked_->Configure(0);
}

// Both forms of kernel 2 (4 split: the chain, then the output pass; 5 fused:
// o on a second set of warps) with every V tile: within the oracle's bars, and
// at each V tile bitwise equal to each other (the same products in the same
// order), o and every final state; V tiles 32 and 64 bitwise equal too (V tile
// 16 sums W S in two chains, state_chain.cuh).
TEST_F(ChunkedPrefillTest, EveryKernel2FormAndVTileGiveTheSameBits) {
  const std::vector<int> mix = {65, 1, 130, 64, 1000, 7, 257, 63, 2};
  struct Shape {
    GdnOptions options;
    std::vector<int> lens;
  };
  GdnOptions bf16_state = Options(2, 4, 128, 64);
  bf16_state.state_dtype = StateDType::kBF16;
  GdnOptions k64_v128 = Options(1, 2, 64, 128);
  GdnOptions fp16_io = Options(2, 4, 128, 128);
  fp16_io.input_dtype = DType::kF16;
  const std::vector<Shape> shapes = {{Options(2, 4, 128, 128), mix},
                                     {bf16_state, {200, 64, 3}},
                                     {k64_v128, {1000, 65}},
                                     {fp16_io, {300, 65, 1}}};
  for (const Shape& shape : shapes) {
    const uint64_t seed = FreshSeed();
    const oracle::Inputs inputs = testing::MakeRandomInputs(shape.options, shape.lens, seed, true);
    std::optional<testing::BackendOutputs> first;
    for (int v_tile : {16, 32, 64}) {
      if (v_tile == 32) first.reset();  // a new summation order from here on
      for (cuda::ChunkedStatePass form : {cuda::ChunkedStatePass::kSplit,
                                          cuda::ChunkedStatePass::kFused}) {
        SCOPED_TRACE(absl::StrCat(DescribeOptions(shape.options), " seed ", seed, " v_tile ",
                                  v_tile, " kernel 2 form ", static_cast<int>(form)));
        chunked_->Configure(v_tile, form);
        absl::StatusOr<testing::BackendOutputs> got = testing::RunOnBackend(
            *chunked_, shape.options, inputs, testing::EntryPoint::kPrefill);
        ASSERT_TRUE(got.ok()) << got.status();
        if (!first.has_value()) {
          const oracle::Outputs want = oracle::Run(shape.options, inputs);
          const testing::ErrorStats o_err =
              testing::Compare(got->o.data(), want.o.data(), want.o.size());
          EXPECT_LE(o_err.max_abs_rel, ChunkedOutputTolerance(shape.options).max_abs_rel)
              << testing::ToString(o_err);
          first = *std::move(got);
          continue;
        }
        EXPECT_EQ(got->o, first->o) << "o differs from the split form at the first V tile";
        ASSERT_EQ(got->final_states.size(), first->final_states.size());
        for (size_t i = 0; i < got->final_states.size(); ++i) {
          EXPECT_EQ(got->final_states[i], first->final_states[i]) << "state " << i;
        }
      }
    }
  }
  chunked_->Configure(0);
}

TEST_F(ChunkedPrefillTest, ServerDefaultShapeLongSequence) {
  ExpectPrefillMatches(Options(16, 32, 128, 128), {2048}, true);
}

// The cuda backend's own Prefill routes long bf16 sequences to the chunked
// kernel on its stream (workspace grown there): same answers, twice in a row
// (the second call reuses the workspace), then a larger call (it grows).
TEST_F(ChunkedPrefillTest, BackendPrefillOfLongBf16Sequences) {
  ExpectPrefillMatches(Options(2, 4, 128, 128), {700, 300}, true,
                       testing::GateProfile::kRandom, backend_.get());
  ExpectPrefillMatches(Options(2, 4, 128, 128), {700, 300}, true,
                       testing::GateProfile::kRandom, backend_.get());
  ExpectPrefillMatches(Options(2, 4, 128, 128), {3000, 257, 1000}, false,
                       testing::GateProfile::kRandom, backend_.get());
}

// Prefill (chunked) of the first part of each sequence, then the backend's
// Decode of the next 1..8 tokens from the pages the prefill wrote, against
// one oracle run over the whole sequences.
TEST_F(ChunkedPrefillTest, PrefillThenDecodeMatchesOracle) {
  const GdnOptions options = Options(2, 4, 128, 128);
  const std::vector<int> prefill_lens = {500, 64, 1};
  const std::vector<int> decode_lens = {3, 8, 1};
  std::vector<int> whole;
  for (size_t i = 0; i < prefill_lens.size(); ++i) whole.push_back(prefill_lens[i] + decode_lens[i]);
  // Both generations write the pages decode reads: v7 forced, then the auto
  // route with the v8 threshold at 1 unit (v8 on compute capability 9.0).
  for (const bool v8 : {false, true}) {
    chunked_->launcher().set_generation(v8 ? cuda::ChunkedGeneration::kAuto
                                           : cuda::ChunkedGeneration::kV7);
    chunked_->launcher().set_v8_min_units(v8 ? 1 : -1);
    SCOPED_TRACE(v8 ? "auto route, v8 threshold 1" : "v7 forced");
    const uint64_t seed = FreshSeed();
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const oracle::Inputs all = testing::MakeRandomInputs(options, whole, seed, true);
    const int hqk = options.shape.num_qk_heads, hv = options.shape.num_v_heads;
    const int K = options.shape.head_dim_k, V = options.shape.head_dim_v;

    // Splits `all` into the first / last tokens of every sequence.
    auto slice = [&](bool first) {
      oracle::Inputs part;
      part.cu_seqlens = {0};
      for (size_t i = 0; i < whole.size(); ++i) {
        const int begin = all.cu_seqlens[i] + (first ? 0 : prefill_lens[i]);
        const int len = first ? prefill_lens[i] : decode_lens[i];
        part.cu_seqlens.push_back(part.cu_seqlens.back() + len);
        auto take = [&](const std::vector<float>& src, std::vector<float>* dst, int width) {
          dst->insert(dst->end(), src.begin() + int64_t{begin} * width,
                      src.begin() + int64_t{begin + len} * width);
        };
        take(all.q, &part.q, hqk * K);
        take(all.k, &part.k, hqk * K);
        take(all.v, &part.v, hv * V);
        take(all.g, &part.g, hv);
        take(all.beta, &part.beta, hv);
      }
      return part;
    };
    oracle::Inputs first = slice(true);
    first.initial_states = all.initial_states;
    absl::StatusOr<testing::BackendOutputs> pre =
        testing::RunOnBackend(*chunked_, options, first, testing::EntryPoint::kPrefill);
    ASSERT_TRUE(pre.ok()) << pre.status();
    oracle::Inputs second = slice(false);
    second.initial_states = pre->final_states;  // fp32 pages: exact
    absl::StatusOr<testing::BackendOutputs> dec =
        testing::RunOnBackend(*backend_, options, second, testing::EntryPoint::kDecode);
    ASSERT_TRUE(dec.ok()) << dec.status();

    const oracle::Outputs want = oracle::Run(options, all);
    std::vector<float> o(want.o.size());
    const int row = hv * V;
    for (size_t i = 0; i < whole.size(); ++i) {
      std::copy(pre->o.begin() + int64_t{first.cu_seqlens[i]} * row,
                pre->o.begin() + int64_t{first.cu_seqlens[i + 1]} * row,
                o.begin() + int64_t{all.cu_seqlens[i]} * row);
      std::copy(dec->o.begin() + int64_t{second.cu_seqlens[i]} * row,
                dec->o.begin() + int64_t{second.cu_seqlens[i + 1]} * row,
                o.begin() + int64_t{all.cu_seqlens[i] + prefill_lens[i]} * row);
    }
    const testing::ErrorStats o_err = testing::Compare(o.data(), want.o.data(), o.size());
    EXPECT_EQ(o_err.nonfinite, 0);
    EXPECT_LE(o_err.max_abs_rel, kMaxAbsRelTolerance) << testing::ToString(o_err);
    EXPECT_LE(o_err.rel_l2, kRelL2Tolerance) << testing::ToString(o_err);
    for (size_t i = 0; i < whole.size(); ++i) {
      const testing::ErrorStats s_err = testing::Compare(
          dec->final_states[i].data(), want.final_states[i].data(), want.final_states[i].size());
      EXPECT_LE(s_err.max_abs_rel, kMaxAbsRelTolerance)
          << "state " << i << ": " << testing::ToString(s_err);
    }
  }
  chunked_->launcher().set_generation(cuda::ChunkedGeneration::kAuto);
  chunked_->launcher().set_v8_min_units(-1);
}

TEST(ChunkedPrefillSupports, NamesWhatItRefuses) {
  GdnOptions options = Options(2, 4, 96, 128);
  absl::Status s = cuda::ChunkedPrefill::Supports(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("head_dim_k"), absl::string_view::npos) << s;
  options = Options(2, 4, 128, 128);
  EXPECT_TRUE(cuda::ChunkedPrefill::Supports(options).ok());
}

// The cuda backend's routing (host logic, no GPU): the chunked kernel for
// bf16 and fp16 inputs averaging >= kChunkedPrefillMinTokensPerSeq tokens per
// sequence and head dims it supports; fp32 inputs never.
TEST(ChunkedPrefillSupports, RoutingPolicy) {
  const int min_tokens = cuda::kChunkedPrefillMinTokensPerSeq;
  GdnParams params;
  params.num_seqs = 8;
  params.total_tokens = 8 * min_tokens;
  GdnOptions options = Options(16, 32, 128, 128);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    options.input_dtype = dt;
    EXPECT_TRUE(cuda::PrefersChunkedPrefill(options, params)) << DTypeName(dt);
  }
  params.total_tokens = 8 * min_tokens - 1;
  EXPECT_FALSE(cuda::PrefersChunkedPrefill(options, params)) << "below the average";
  params.total_tokens = 8 * min_tokens;
  options.input_dtype = DType::kF32;
  EXPECT_FALSE(cuda::PrefersChunkedPrefill(options, params)) << "fp32 inputs";
  options = Options(2, 4, 96, 128);
  EXPECT_FALSE(cuda::PrefersChunkedPrefill(options, params)) << "head_dim_k 96";
}

// Kernel 2's forms (host logic, no GPU): auto picks the split form at V tile
// 16 and the fused one at 32 / 64; forced forms stay; only the split form
// needs the extra workspace.
TEST(ChunkedPrefillSupports, KernelTwoFormByVTile) {
  using cuda::ChunkedPrefill;
  using cuda::ChunkedStatePass;
  EXPECT_EQ(ChunkedPrefill::ResolveStatePass(ChunkedStatePass::kAuto, 16), ChunkedStatePass::kSplit);
  EXPECT_EQ(ChunkedPrefill::ResolveStatePass(ChunkedStatePass::kAuto, 32), ChunkedStatePass::kFused);
  EXPECT_EQ(ChunkedPrefill::ResolveStatePass(ChunkedStatePass::kAuto, 64), ChunkedStatePass::kFused);
  EXPECT_EQ(ChunkedPrefill::ResolveStatePass(ChunkedStatePass::kSplit, 64), ChunkedStatePass::kSplit);
  EXPECT_EQ(ChunkedPrefill::ResolveStatePass(ChunkedStatePass::kFused, 16), ChunkedStatePass::kFused);
  // The C ABI's codes (gdn_chunked_prefill_tuned's state_variant).
  EXPECT_EQ(static_cast<int>(ChunkedStatePass::kAuto), 0);
  EXPECT_EQ(static_cast<int>(ChunkedStatePass::kSplit), 4);
  EXPECT_EQ(static_cast<int>(ChunkedStatePass::kFused), 5);
  const GdnOptions options = Options(16, 32, 128, 128);
  const size_t fused = ChunkedPrefill::WorkspaceBytes(options, 1, 512, ChunkedStatePass::kFused);
  const size_t split = ChunkedPrefill::WorkspaceBytes(options, 1, 512, ChunkedStatePass::kSplit);
  // + S^T (K x V) and U'^T (V x 64) in bf16 per (chunk, value head).
  EXPECT_GE(split - fused, size_t{512} * 32 * (128 * 128 + 128 * 64) * 2);
  EXPECT_EQ(ChunkedPrefill::WorkspaceBytes(options, 1, 512), split);  // auto: the larger
}

}  // namespace
}  // namespace gdn::gpu_test
