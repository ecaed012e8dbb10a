// wgmma (kernels/cuda/common/wgmma.cuh), the tensor-core GEMM the v8
// chunked prefill is built on (bench/prefill/HOPPER_DESIGN.md §5 step 0):
//   D[64, N] = A[64, K] B[K, N], fp32 accumulate, N in {64, 128} (and 32
//   for the SS form with B K-major: the aux form's half of P,
//   fused_chunk_aux.cuh IssuePHalf),
//   K in {16, 64, 128}, bf16 and fp16, B K-major and MN-major, SW128 and
//   non-swizzled shared layouts, SS form and RS form (A converted in
//   registers from the fp32 accumulator of a previous wgmma, as the v8
//   chain feeds S^T back), random data (fixed seed) and awkward data
//   (zeros, a zero row and column, large and tiny magnitudes). Padding
//   K columns that must not be read hold NaN.
// Every product is checked against float64 with the bound stated at
// CheckProduct (tests/gpu/hopper_test_support.cuh); each case prints its
// worst err / (2^-23 sum|ab|).
//
// Skips itself without an sm_90 device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/common/tma.cuh"
#include "kernels/cuda/common/wgmma.cuh"
#include "tests/gpu/hopper_test_support.cuh"

namespace gdn::cuda {
namespace {

using hopper_test::Bf16;
using hopper_test::CheckProduct;
using hopper_test::DeviceBuffer;
using hopper_test::F16;
using hopper_test::HopperTest;
using hopper_test::RandomValues;

// Global operands (16-bit bit patterns, row-major):
//   a   [64][128]  A, columns >= k hold NaN (must never be read)
//   b   K-major: [n][128] (B^T, columns >= k NaN); MN-major: [k][n]
//   a0  [64][64], b0 [128][64]: the RS form's first product D1 = A0 B0^T
//       (m64n128k16 x 4); A = D1[:, :k] rounded to the type in registers.
struct GemmArgs {
  const uint16_t* a;
  const uint16_t* b;
  const uint16_t* a0;
  const uint16_t* b0;
  float* d;   // [64][n]
  float* d1;  // [64][128]
  int k;
  int swizzle;  // 1: SW128, 0: non-swizzled core matrices
};

constexpr uint32_t kSmemA = 0;             // 16 KB: A [64][<=128]
constexpr uint32_t kSmemB = 16384;         // 32 KB: B [128][128]
constexpr uint32_t kSmemA0 = 49152;        // 8 KB: A0 [64][64]
constexpr uint32_t kSmemB0 = 57344;        // 16 KB: B0 [128][64]
constexpr uint32_t kGemmSmem = 73728 + 1024;

__device__ __forceinline__ void StoreHalf(uint8_t* base, uint32_t offset, uint16_t v) {
  *reinterpret_cast<uint16_t*>(base + offset) = v;
}

template <int N, bool kBMn>
__device__ __forceinline__ uint64_t GemmDescB(uint32_t b_addr, int kk, int k, bool sw) {
  if constexpr (kBMn) {
    // [k rows][N]: SW128 N blocks of [k][64] are k * 128 bytes apart.
    return sw ? WgmmaDescSw128MnMajor(b_addr + 2048 * kk, k * 128)
              : WgmmaDescInterleavedMnMajor(b_addr + 256 * kk, 128, k * 16);
  } else {
    // [N][k]: SW128 K blocks of [N][64] are N * 128 bytes apart.
    return sw ? AdvanceWgmmaDescriptor(WgmmaDescSw128KMajor(b_addr + (kk / 4) * N * 128),
                                       32 * (kk % 4))
              : WgmmaDescInterleavedKMajor(b_addr + kk * 2 * N * 16, N * 16, 128);
  }
}

__device__ __forceinline__ uint64_t GemmDescA(uint32_t a_addr, int kk, bool sw) {
  return sw ? AdvanceWgmmaDescriptor(WgmmaDescSw128KMajor(a_addr + (kk / 4) * 64 * 128),
                                     32 * (kk % 4))
            : WgmmaDescInterleavedKMajor(a_addr + kk * 2 * 64 * 16, 64 * 16, 128);
}

template <typename T, int N, bool kBMn, bool kRs>
__global__ void __launch_bounds__(128) GemmKernel(GemmArgs args) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = AlignShared<1024>(smem_raw);
  const int t = threadIdx.x;
  const bool sw = args.swizzle != 0;
  const int k = args.k;
  // K columns present in the K-major tiles: a whole 128-byte row per block
  // with SW128 (the NaN padding included), exactly k without swizzle.
  const int k_fill = sw ? (k < 64 ? 64 : k) : k;

  if constexpr (!kRs) {
    for (int i = t; i < 64 * k_fill; i += 128) {
      const int m = i / k_fill, c = i % k_fill;
      StoreHalf(smem + kSmemA, sw ? Sw128TileOffset(m, c, 64) : InterleavedKMajorOffset(m, c, 64),
                args.a[m * 128 + c]);
    }
  } else {
    for (int i = t; i < 64 * 64; i += 128) {
      const int m = i / 64, c = i % 64;
      StoreHalf(smem + kSmemA0, Sw128TileOffset(m, c, 64), args.a0[m * 64 + c]);
    }
    for (int i = t; i < 128 * 64; i += 128) {
      const int n = i / 64, c = i % 64;
      StoreHalf(smem + kSmemB0, Sw128TileOffset(n, c, 128), args.b0[n * 64 + c]);
    }
  }
  if constexpr (kBMn) {
    for (int i = t; i < k * N; i += 128) {
      const int r = i / N, n = i % N;
      StoreHalf(smem + kSmemB, sw ? Sw128TileOffset(r, n, k) : InterleavedMnMajorOffset(r, n, k),
                args.b[r * N + n]);
    }
  } else {
    for (int i = t; i < N * k_fill; i += 128) {
      const int n = i / k_fill, c = i % k_fill;
      StoreHalf(smem + kSmemB, sw ? Sw128TileOffset(n, c, N) : InterleavedKMajorOffset(n, c, N),
                args.b[n * 128 + c]);
    }
  }
  FenceProxyAsyncShared();  // thread writes -> visible to wgmma's operand reads
  __syncthreads();

  const uint32_t base = SharedAddress32(smem);
  const int ksteps = k / 16;
  uint32_t a[8][4];  // RS: the A fragments of the 8 k-steps (bf16 / fp16 pairs)
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.0f;

  if constexpr (kRs) {
    // D1 = A0 B0^T (m64n128, K = 64, SW128 K-major both).
    float d1[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d1[i] = 0.0f;
    WgmmaFence();
    WgmmaFenceOperands(d1);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      WgmmaSs<T, 128, 0>(d1, GemmDescA(base + kSmemA0, kk, true),
                         AdvanceWgmmaDescriptor(WgmmaDescSw128KMajor(base + kSmemB0), 32 * kk),
                         kk > 0);
    }
    WgmmaCommitGroup();
    WgmmaWaitGroup<0>();
    WgmmaFenceOperands(d1);
#pragma unroll
    for (int i = 0; i < 64; ++i) args.d1[AccRow(t, i) * 128 + AccCol(t, i)] = d1[i];
    // A fragments of every k-step first, then one fence, then the batch.
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) AccToFragmentA<T>(d1, kk, a[kk]);
    WgmmaFenceOperands(d);
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      WgmmaFenceOperands(a[kk]);
      if (kk < ksteps) {
        WgmmaRs<T, N, kBMn ? 1 : 0>(d, a[kk], GemmDescB<N, kBMn>(base + kSmemB, kk, k, sw),
                                    kk > 0);
      }
    }
  } else {
    WgmmaFenceOperands(d);
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      if (kk < ksteps) {
        WgmmaSs<T, N, kBMn ? 1 : 0>(d, GemmDescA(base + kSmemA, kk, sw),
                                    GemmDescB<N, kBMn>(base + kSmemB, kk, k, sw), kk > 0);
      }
    }
  }
  WgmmaCommitGroup();
  WgmmaWaitGroup<0>();
  WgmmaFenceOperands(d);
  if constexpr (kRs) {
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) WgmmaFenceOperands(a[kk]);  // read until the wait
  }
#pragma unroll
  for (int i = 0; i < N / 2; ++i) args.d[AccRow(t, i) * N + AccCol(t, i)] = d[i];
}

struct GemmCase {
  int n;
  int k;
  bool b_mn;
  bool rs;
  bool swizzle;
  bool awkward;
};

std::string Describe(const char* type, const GemmCase& c) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s m64n%dk%d %s B %s-major %s %s", type, c.n, c.k,
                c.rs ? "RS" : "SS", c.b_mn ? "MN" : "K", c.swizzle ? "SW128" : "no-swizzle",
                c.awkward ? "awkward" : "random");
  return buf;
}

template <typename Type, int N, bool kBMn, bool kRs>
void RunGemm(const GemmCase& c, uint64_t seed) {
  const std::string what = Describe(Type::kName, c);
  SCOPED_TRACE(what);
  std::mt19937_64 rng(seed);
  std::vector<uint16_t> a = RandomValues<Type>(64 * 128, rng, c.awkward);
  std::vector<uint16_t> b = RandomValues<Type>(static_cast<size_t>(128) * N, rng, c.awkward);
  // The RS form's D1 stays moderate (awkward D1 x awkward B could pass
  // fp32's range with bf16); its awkward part is B, a zero D1 row 9 and a
  // D1 row 11 of magnitude ~2^22 (fp16: A0 row 11 saturates at 65504 and
  // D1 row 11 saturates again when rounded to the A operand).
  std::vector<uint16_t> a0 = RandomValues<Type>(64 * 64, rng, false);
  std::vector<uint16_t> b0 = RandomValues<Type>(128 * 64, rng, false);
  // B(kk, j) in either storage.
  auto b_at = [&](int kk, int j) -> uint16_t& {
    return kBMn ? b[static_cast<size_t>(kk) * N + j] : b[static_cast<size_t>(j) * 128 + kk];
  };
  if (c.awkward) {
    for (int kk = 0; kk < 128; ++kk) a[5 * 128 + kk] = 0;        // A row 5 = 0
    for (int kk = 0; kk < c.k; ++kk) b_at(kk, 7) = 0;             // B column 7 = 0
    for (int kk = 0; kk < 64; ++kk) a0[9 * 64 + kk] = 0;          // D1 row 9 = 0
    for (int kk = 0; kk < 64; ++kk) {                              // D1 row 11 large
      a0[11 * 64 + kk] = Type::FromFloat(std::ldexp(Type::ToFloat(a0[11 * 64 + kk]), 20));
    }
  }
  // Columns >= k of the K-major tiles must never be read.
  for (int m = 0; m < 64; ++m) {
    for (int kk = c.k; kk < 128; ++kk) a[m * 128 + kk] = Type::kNaN;
  }
  if (!kBMn) {
    for (int j = 0; j < N; ++j) {
      for (int kk = c.k; kk < 128; ++kk) b[static_cast<size_t>(j) * 128 + kk] = Type::kNaN;
    }
  }

  DeviceBuffer d_a(a.size() * 2), d_b(b.size() * 2), d_a0(a0.size() * 2), d_b0(b0.size() * 2),
      d_d(64 * N * 4), d_d1(64 * 128 * 4);
  ASSERT_NE(d_d1.ptr, nullptr);
  ASSERT_CUDA(cudaMemcpy(d_a.ptr, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d_b.ptr, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d_a0.ptr, a0.data(), a0.size() * 2, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d_b0.ptr, b0.data(), b0.size() * 2, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(d_d.ptr, 0xFF, 64 * N * 4));  // NaN: unwritten elements fail
  ASSERT_CUDA(cudaMemset(d_d1.ptr, 0xFF, 64 * 128 * 4));

  GemmArgs args{d_a.as<uint16_t>(), d_b.as<uint16_t>(), d_a0.as<uint16_t>(), d_b0.as<uint16_t>(),
                d_d.as<float>(),    d_d1.as<float>(),   c.k,
                c.swizzle ? 1 : 0};
  auto kernel = GemmKernel<typename Type::Device, N, kBMn, kRs>;
  ASSERT_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(kGemmSmem)));
  kernel<<<1, 128, kGemmSmem>>>(args);
  ASSERT_CUDA(cudaGetLastError());
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<float> d(64 * N), d1(64 * 128);
  ASSERT_CUDA(cudaMemcpy(d.data(), d_d.ptr, d.size() * 4, cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(d1.data(), d_d1.ptr, d1.size() * 4, cudaMemcpyDeviceToHost));

  auto bf = [&](int kk, int j) { return Type::ToFloat(b_at(kk, j)); };
  double worst = 0, worst1 = 0;
  if constexpr (kRs) {
    worst1 = CheckProduct(
        d1, 64, 128, 64, [&](int m, int kk) { return Type::ToFloat(a0[m * 64 + kk]); },
        [&](int kk, int j) { return Type::ToFloat(b0[j * 64 + kk]); }, what + " D1 = A0 B0^T");
    // A = D1 as the device rounded it (to nearest even; fp16 saturating).
    std::vector<float> a_rs(64 * 128);
    for (size_t i = 0; i < a_rs.size(); ++i) a_rs[i] = Type::ToFloat(Type::FromFloat(d1[i]));
    worst = CheckProduct(
        d, 64, N, c.k, [&](int m, int kk) { return a_rs[m * 128 + kk]; }, bf, what);
  } else {
    worst = CheckProduct(
        d, 64, N, c.k, [&](int m, int kk) { return Type::ToFloat(a[m * 128 + kk]); }, bf, what);
  }
  std::printf("  %-52s worst err / (2^-23 sum|ab|) = %6.3f (bound %d)%s\n", what.c_str(), worst,
              2 * c.k, kRs ? (" D1 " + std::to_string(worst1)).c_str() : "");
}

// One suite instance per (type, form, B major, swizzle), each over N in
// {64, 128}, K in {16, 64, 128}, random and awkward data: a layout that is
// wrong fails its own instance only.
struct GemmVariant {
  bool bf16;
  bool rs;
  bool b_mn;
  bool swizzle;
};

template <typename Type>
void RunGemmVariant(const GemmVariant& v) {
  uint64_t seed = 0x9e3779b97f4a7c15ull ^ (v.rs * 8 + v.b_mn * 4 + v.swizzle * 2 + v.bf16);
  for (const bool awkward : {false, true}) {
    for (const int n : {32, 64, 128}) {
      if (n == 32 && (v.b_mn || v.rs)) continue;  // instantiated for SS, B K-major only
      for (const int k : {16, 64, 128}) {
        const GemmCase c{n, k, v.b_mn, v.rs, v.swizzle, awkward};
        ++seed;
        // Runtime -> template: N, B major, form.
        if (n == 32) RunGemm<Type, 32, false, false>(c, seed);
        if (n == 64 && !v.b_mn && !v.rs) RunGemm<Type, 64, false, false>(c, seed);
        if (n == 64 && !v.b_mn && v.rs) RunGemm<Type, 64, false, true>(c, seed);
        if (n == 64 && v.b_mn && !v.rs) RunGemm<Type, 64, true, false>(c, seed);
        if (n == 64 && v.b_mn && v.rs) RunGemm<Type, 64, true, true>(c, seed);
        if (n == 128 && !v.b_mn && !v.rs) RunGemm<Type, 128, false, false>(c, seed);
        if (n == 128 && !v.b_mn && v.rs) RunGemm<Type, 128, false, true>(c, seed);
        if (n == 128 && v.b_mn && !v.rs) RunGemm<Type, 128, true, false>(c, seed);
        if (n == 128 && v.b_mn && v.rs) RunGemm<Type, 128, true, true>(c, seed);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

class WgmmaTest : public HopperTest, public ::testing::WithParamInterface<GemmVariant> {};

TEST_P(WgmmaTest, MatchesFloat64) {
  if (GetParam().bf16) {
    RunGemmVariant<Bf16>(GetParam());
  } else {
    RunGemmVariant<F16>(GetParam());
  }
}

std::vector<GemmVariant> AllGemmVariants() {
  std::vector<GemmVariant> out;
  for (const bool bf16 : {true, false}) {
    for (const bool rs : {false, true}) {
      for (const bool b_mn : {false, true}) {
        for (const bool swizzle : {true, false}) out.push_back({bf16, rs, b_mn, swizzle});
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    Hopper, WgmmaTest, ::testing::ValuesIn(AllGemmVariants()),
    [](const ::testing::TestParamInfo<GemmVariant>& info) {
      const GemmVariant& v = info.param;
      return std::string(v.bf16 ? "Bf16" : "Fp16") + (v.rs ? "_RS" : "_SS") +
             (v.b_mn ? "_BMnMajor" : "_BKMajor") + (v.swizzle ? "_SW128" : "_NoSwizzle");
    });

}  // namespace
}  // namespace gdn::cuda
