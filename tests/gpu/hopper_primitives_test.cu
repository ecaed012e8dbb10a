// The Hopper primitives of kernels/cuda/common (mbarrier.cuh, tma.cuh,
// wgmma.cuh) that the v8 chunked prefill is built on
// (bench/prefill/HOPPER_DESIGN.md §5 step 0):
//   - DescriptorBits, FragmentLayouts (host only, run everywhere): the
//     descriptor bit fields, the SW128 offset formula on hand-computed
//     points, the accumulator layout is a bijection onto [64, N], and the
//     accumulator -> A-fragment reuse lands every value on the A position
//     the PTX A layout gives it.
//   - TmaRoundTrip2D / 3D: [rows, 128] bf16 tiles (2-D map; and the v8 q/k/v
//     view [T, H, 128] as a 3-D map, one head per box) loaded as two (64,
//     64-row) SWIZZLE_128B boxes, completing on an mbarrier, then stored back
//     with TMA to another buffer. Bitwise: every element in range equals the
//     source; the last box runs past the tensor's end, the shared image reads
//     zero there (load fill) and the rows past the end of the destination
//     keep their sentinel (store clip); the shared image is exactly
//     Sw128TileOffset's swizzle (the layout the SW128 descriptors assume).
//   - Wgmma: D[64, N] = A[64, K] B[K, N], fp32 accumulate, N in {64, 128},
//     K in {16, 64, 128}, bf16 and fp16, B K-major and MN-major, SW128 and
//     non-swizzled shared layouts, SS form and RS form (A converted in
//     registers from the fp32 accumulator of a previous wgmma, as the v8
//     chain feeds S^T back), random data (fixed seed) and awkward data
//     (zeros, a zero row and column, large and tiny magnitudes). Padding
//     K columns that must not be read hold NaN.
//   - WarpSpecializedPipeline: producer warpgroup (setmaxnreg.dec) issuing
//     TMA loads into a 2-stage ring of full / empty mbarriers, two consumer
//     warpgroups (setmaxnreg.inc) running SS wgmma m64n128k16 on SW128 tiles
//     (A K-major, B MN-major: the v8 state-update operand shapes), 8 stages
//     so every barrier goes through 4 phases.
//
// Bound (every GEMM): the reference is the float64 sum of the products of
// the same rounded 16-bit inputs (exact: a product of two 16-bit floats is
// exact in fp32 and float64, and a float64 sum of <= 512 of them is exact to
// ~1e-16 relative). The device forms the same products exactly and adds K
// of them in fp32; with any faithful rounding (error <= 1 ulp = 2^-23
// relative per addition, truncation included) the first-order error bound
// is (K - 1) 2^-23 sum_k |a_ik b_kj|. The test allows
//   |D - ref| <= K 2^-22 sum_k |a_ik b_kj|,
// twice that, for the tensor core's alignment of the summands of one k-group
// to their largest exponent before they are added. A row or column that is
// all zero must give exactly 0. Layout or descriptor errors give errors of
// the order of the sum itself (or NaN from the padding), 1e4x the bound.
// Each case prints its worst err / (2^-23 sum|ab|).
//
// Skips itself without an sm_90 device.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/common/mbarrier.cuh"
#include "kernels/cuda/common/tma.cuh"
#include "kernels/cuda/common/wgmma.cuh"

namespace gdn::cuda {
namespace {

#define ASSERT_CUDA(expr)                                                         \
  do {                                                                            \
    const cudaError_t err_ = (expr);                                              \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_);    \
  } while (0)

#define ASSERT_CU(expr)                                 \
  do {                                                  \
    const CUresult res_ = (expr);                       \
    ASSERT_EQ(res_, CUDA_SUCCESS) << #expr << " = " << static_cast<int>(res_); \
  } while (0)

bool HopperAvailable() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return false;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return false;
  return prop.major == 9 && prop.minor == 0;  // the binary is sm_90a only
}

class HopperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HopperAvailable()) GTEST_SKIP() << "no sm_90 device";
  }
};

// Device memory freed at scope end.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

// ---- host 16-bit arithmetic (bit patterns) ---------------------------------------

struct Bf16 {
  using Device = __nv_bfloat16;
  static constexpr const char* kName = "bf16";
  static constexpr CUtensorMapDataType kMapType = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  static constexpr uint16_t kNaN = 0x7FC0;
  static constexpr int kLargeExp = 40;   // |x| up to 2^41: products 2^82, sums fine in fp32
  static constexpr int kTinyExp = -40;
  static float ToFloat(uint16_t bits) {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // Round to nearest even (cvt.rn.bf16x2.f32 on finite values).
  static uint16_t FromFloat(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f)) return kNaN;
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
};

struct F16 {
  using Device = __half;
  static constexpr const char* kName = "fp16";
  static constexpr CUtensorMapDataType kMapType = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  static constexpr uint16_t kNaN = 0x7E00;
  static constexpr int kLargeExp = 12;   // |x| up to 8192 (max 65504): sums of 128 fine
  static constexpr int kTinyExp = -12;   // stays normal (min normal 2^-14) times U[1, 2)
  static float ToFloat(uint16_t bits) {
    __half_raw raw;
    raw.x = bits;
    return __half2float(__half(raw));
  }
  // Round to nearest even with saturation to +-65504 (cvt.rn.satfinite).
  static uint16_t FromFloat(float f) {
    if (!std::isnan(f)) f = std::min(65504.0f, std::max(-65504.0f, f));
    const __half h = __float2half_rn(f);
    return static_cast<__half_raw>(h).x;
  }
};

// Random values rounded to the type. Awkward mode: 25% zeros, 10% large
// (2^kLargeExp x U[1, 2)), 10% tiny (2^kTinyExp x U[1, 2)), the rest
// U[-1, 1], each with a random sign.
template <typename Type>
std::vector<uint16_t> RandomValues(size_t n, std::mt19937_64& rng, bool awkward) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    float x = uniform(rng);
    if (awkward) {
      const float pick = unit(rng);
      const float sign = unit(rng) < 0.5f ? -1.0f : 1.0f;
      if (pick < 0.25f) {
        x = 0.0f;
      } else if (pick < 0.35f) {
        x = sign * std::ldexp(1.0f + unit(rng), Type::kLargeExp);
      } else if (pick < 0.45f) {
        x = sign * std::ldexp(1.0f + unit(rng), Type::kTinyExp);
      }
    }
    out[i] = Type::FromFloat(x);
  }
  return out;
}

// ---- host-only checks ---------------------------------------------------------------

TEST(HopperPrimitivesHost, DescriptorBits) {
  // start 0x1000 >> 4 = 0x100 (bits 0-13), LBO 16 >> 4 = 1 (bits 16-29),
  // SBO 1024 >> 4 = 64 (bits 32-45), swizzle 128B = 1 (bits 62-63).
  static_assert(MakeWgmmaDescriptor(0x1000, 16, 1024, WgmmaSwizzle::k128B) ==
                0x4000004000010100ull);
  static_assert(WgmmaDescSw128KMajor(0x1000) == 0x4000004000010100ull);
  // MN-major SW128: LBO = the N-block distance (8192 -> 512 = 0x200).
  static_assert(WgmmaDescSw128MnMajor(0x2400, 8192) == 0x4000004002000240ull);
  // No swizzle: bits 62-63 zero.
  static_assert(WgmmaDescInterleavedKMajor(0x800, 1024, 128) == 0x0000000800400080ull);
  // Advancing by 32 bytes adds 2 to the start field only.
  static_assert(AdvanceWgmmaDescriptor(0x4000004000010100ull, 32) == 0x4000004000010102ull);
  // Addresses above 256 KiB wrap out (the field holds addr bits 4-17).
  static_assert(MakeWgmmaDescriptor(0x40010, 0, 0, WgmmaSwizzle::kNone) == 1);
  EXPECT_EQ(MakeWgmmaDescriptor(0x1000, 16, 1024, WgmmaSwizzle::k128B) >> 62, 1u);

  // SW128 offsets: row 1 moves chunk 0 to chunk 1; row 9 of block 1.
  EXPECT_EQ(Sw128TileOffset(0, 0, 64), 0u);
  EXPECT_EQ(Sw128TileOffset(1, 0, 64), 128u + 16u);
  EXPECT_EQ(Sw128TileOffset(1, 8, 64), 128u);
  EXPECT_EQ(Sw128TileOffset(9, 70, 64), 8192u + 1152u + 16u + 12u);
  EXPECT_EQ(Sw128TileOffset(7, 63, 16), 7u * 128u + ((7u ^ 7u) * 16u) + 14u);
  // Every element of a [64][128] tile gets its own 2 bytes of the 16 KB.
  std::set<uint32_t> seen;
  for (uint32_t r = 0; r < 64; ++r) {
    for (uint32_t c = 0; c < 128; ++c) seen.insert(Sw128TileOffset(r, c, 64));
  }
  EXPECT_EQ(seen.size(), 64u * 128u);
  EXPECT_EQ(*seen.rbegin(), 16384u - 2u);
}

TEST(HopperPrimitivesHost, FragmentLayouts) {
  for (const int n : {64, 128}) {
    std::vector<int> hits(64 * n, 0);
    for (int t = 0; t < 128; ++t) {
      for (int i = 0; i < n / 2; ++i) ++hits[AccRow(t, i) * n + AccCol(t, i)];
    }
    EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; })) << n;
  }
  // AccToFragmentA: register r, half h of k-step kk takes d[8 kk + 2 r + h];
  // the PTX A layout puts that register at row 16 w + g + 8 (r % 2), column
  // 16 kk + 2 q + h + 8 (r / 2).
  for (int t = 0; t < 128; ++t) {
    const int w = t / 32, g = (t % 32) / 4, q = t % 4;
    for (int kk = 0; kk < 8; ++kk) {
      for (int r = 0; r < 4; ++r) {
        for (int h = 0; h < 2; ++h) {
          const int i = 8 * kk + 2 * r + h;
          ASSERT_EQ(AccRow(t, i), 16 * w + g + 8 * (r % 2));
          ASSERT_EQ(AccCol(t, i), 16 * kk + 2 * q + h + 8 * (r / 2));
        }
      }
    }
  }
}

// MbarrierWait with a watchdog: a phase that never completes (wrong
// transaction bytes, a lost arrival) traps after ~2 s of spinning instead of
// hanging the test binary, so the failure names the kernel.
__device__ void WaitOrTrap(uint64_t* bar, uint32_t parity) {
  const long long start = clock64();
  while (!MbarrierTryWait(bar, parity)) {
    if (clock64() - start > (1ll << 32)) {  // ~2.3 s at 1.98 GHz
      printf("mbarrier wait timed out: block %d thread %d parity %u\n", blockIdx.x, threadIdx.x,
             parity);
      __trap();
    }
  }
}

// ---- TMA round trip ----------------------------------------------------------------

constexpr int kBoxRows = 64;
constexpr uint32_t kBlockBytes = kBoxRows * 128;  // one (64, 64-row) bf16 box
constexpr uint32_t kTileBytes = 2 * kBlockBytes;  // [64 rows][128 cols]

// One CTA per (64-row tile, head): loads the tile as two SW128 boxes (columns
// 0-63, 64-127), copies the shared image to `dump`, stores the tile to `dst`.
template <int kRank>
__global__ void __launch_bounds__(128) TmaRoundTripKernel(const __grid_constant__ CUtensorMap src,
                                                          const __grid_constant__ CUtensorMap dst,
                                                          uint8_t* dump) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* tile = AlignShared<1024>(smem_raw);
  __shared__ uint64_t bar;
  const int row0 = blockIdx.x * kBoxRows;
  const int head = blockIdx.y;
  if (threadIdx.x == 0) {
    TmaPrefetchDescriptor(&src);
    TmaPrefetchDescriptor(&dst);
    MbarrierInit(&bar, 1);
    FenceMbarrierInit();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    MbarrierArriveExpectTx(&bar, kTileBytes);  // whole boxes, also past the end
    for (int b = 0; b < 2; ++b) {
      if constexpr (kRank == 2) {
        TmaLoad2D(tile + b * kBlockBytes, &src, &bar, 64 * b, row0);
      } else {
        TmaLoad3D(tile + b * kBlockBytes, &src, &bar, 64 * b, head, row0);
      }
    }
  }
  WaitOrTrap(&bar, 0);
  uint8_t* out = dump + static_cast<size_t>(head * gridDim.x + blockIdx.x) * kTileBytes;
  for (uint32_t i = threadIdx.x * 16; i < kTileBytes; i += 128 * 16) {
    *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(tile + i);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b) {
      if constexpr (kRank == 2) {
        TmaStore2D(&dst, tile + b * kBlockBytes, 64 * b, row0);
      } else {
        TmaStore3D(&dst, tile + b * kBlockBytes, 64 * b, head, row0);
      }
    }
    TmaStoreCommit();
    TmaStoreWait<0>();
  }
}

// rows x heads x 128 bf16 (row-major [rows][heads][128]); rank 2 uses heads = 1.
template <int kRank>
void RunTmaRoundTrip(int rows, int heads) {
  const int tiles = (rows + kBoxRows - 1) / kBoxRows;
  const int alloc_rows = tiles * kBoxRows;  // the destination has room past the end
  const size_t row_elems = static_cast<size_t>(heads) * 128;
  std::mt19937_64 rng(0x5eed0001 + kRank);
  std::vector<uint16_t> src(rows * row_elems);
  for (auto& v : src) v = static_cast<uint16_t>(rng());  // any bits: a copy is bitwise
  constexpr uint16_t kSentinel = 0xA5A5;
  DeviceBuffer d_src(src.size() * 2), d_dst(alloc_rows * row_elems * 2),
      d_dump(static_cast<size_t>(tiles) * heads * kTileBytes);
  ASSERT_NE(d_src.ptr, nullptr);
  ASSERT_NE(d_dst.ptr, nullptr);
  ASSERT_NE(d_dump.ptr, nullptr);
  ASSERT_CUDA(cudaMemcpy(d_src.ptr, src.data(), src.size() * 2, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(d_dst.ptr, 0xA5, alloc_rows * row_elems * 2));
  ASSERT_CUDA(cudaMemset(d_dump.ptr, 0xFF, static_cast<size_t>(tiles) * heads * kTileBytes));

  CUtensorMap map_src, map_dst;
  if constexpr (kRank == 2) {
    ASSERT_CU(EncodeTensorMap2D(&map_src, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, d_src.ptr, rows, 128,
                                256, kBoxRows, 64, TmaSwizzle::k128B));
    ASSERT_CU(EncodeTensorMap2D(&map_dst, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, d_dst.ptr, rows, 128,
                                256, kBoxRows, 64, TmaSwizzle::k128B));
  } else {
    // The v8 q / k / v view: (K = 128, heads, tokens), box (64, 1, 64).
    const uint64_t dims[3] = {128, static_cast<uint64_t>(heads), static_cast<uint64_t>(rows)};
    const uint64_t strides[2] = {256, row_elems * 2};
    const uint32_t box[3] = {64, 1, kBoxRows};
    ASSERT_CU(EncodeTiledTensorMap(&map_src, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, d_src.ptr, dims,
                                   strides, box, TmaSwizzle::k128B));
    ASSERT_CU(EncodeTiledTensorMap(&map_dst, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, d_dst.ptr, dims,
                                   strides, box, TmaSwizzle::k128B));
  }
  const size_t smem = kTileBytes + 1024;
  ASSERT_CUDA(cudaFuncSetAttribute(TmaRoundTripKernel<kRank>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(smem)));
  TmaRoundTripKernel<kRank><<<dim3(tiles, heads), 128, smem>>>(map_src, map_dst,
                                                               d_dump.as<uint8_t>());
  ASSERT_CUDA(cudaGetLastError());
  ASSERT_CUDA(cudaDeviceSynchronize());

  std::vector<uint16_t> dst(alloc_rows * row_elems);
  std::vector<uint16_t> dump(static_cast<size_t>(tiles) * heads * kTileBytes / 2);
  ASSERT_CUDA(cudaMemcpy(dst.data(), d_dst.ptr, dst.size() * 2, cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(dump.data(), d_dump.ptr, dump.size() * 2, cudaMemcpyDeviceToHost));

  int copy_bad = 0, clip_bad = 0, image_bad = 0;
  for (int r = 0; r < alloc_rows; ++r) {
    for (size_t e = 0; e < row_elems; ++e) {
      const uint16_t got = dst[r * row_elems + e];
      if (r < rows) {
        copy_bad += got != src[r * row_elems + e];
      } else {
        clip_bad += got != kSentinel;
      }
    }
  }
  for (int h = 0; h < heads; ++h) {
    for (int t = 0; t < tiles; ++t) {
      const uint16_t* image = dump.data() + static_cast<size_t>(h * tiles + t) * kTileBytes / 2;
      for (int r = 0; r < kBoxRows; ++r) {
        const int row = t * kBoxRows + r;
        for (int c = 0; c < 128; ++c) {
          const uint16_t want = row < rows ? src[row * row_elems + h * 128 + c] : 0;
          const uint16_t got = image[Sw128TileOffset(r, c, kBoxRows) / 2];
          if (got != want && image_bad++ < 5) {
            ADD_FAILURE() << "shared image head " << h << " row " << row << " col " << c
                          << ": got 0x" << std::hex << got << " want 0x" << want << std::dec;
          }
        }
      }
    }
  }
  EXPECT_EQ(copy_bad, 0) << "elements not copied bitwise";
  EXPECT_EQ(clip_bad, 0) << "elements written past the tensor's end";
  EXPECT_EQ(image_bad, 0) << "shared elements off the SW128 formula (or not zero-filled)";
}

TEST_F(HopperTest, TmaRoundTrip2D) { RunTmaRoundTrip<2>(/*rows=*/200, /*heads=*/1); }
TEST_F(HopperTest, TmaRoundTrip3D) { RunTmaRoundTrip<3>(/*rows=*/100, /*heads=*/3); }

// ---- wgmma GEMMs ---------------------------------------------------------------------

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

// Compares got[m][n] with sum_k a(m, k) b(k, n) in float64 (the accessors
// return the rounded inputs as float). Returns the worst err / (2^-23 sum|ab|).
template <typename AFn, typename BFn>
double CheckProduct(const std::vector<float>& got, int rows, int n, int k, AFn a, BFn b,
                    const std::string& what) {
  const double unit = std::ldexp(1.0, -23);
  double worst = 0;
  int bad = 0;
  for (int m = 0; m < rows; ++m) {
    for (int j = 0; j < n; ++j) {
      double sum = 0, abs_sum = 0;
      for (int kk = 0; kk < k; ++kk) {
        const double p = static_cast<double>(a(m, kk)) * static_cast<double>(b(kk, j));
        sum += p;
        abs_sum += std::fabs(p);
      }
      const double g = got[m * n + j];
      const double err = std::fabs(g - sum);
      const double bound = k * 2.0 * unit * abs_sum;
      const bool ok = std::isfinite(g) && (abs_sum == 0 ? g == 0 : err <= bound);
      if (abs_sum > 0 && std::isfinite(g)) worst = std::max(worst, err / (unit * abs_sum));
      if (!ok && bad++ < 5) {
        ADD_FAILURE() << what << " D[" << m << "][" << j << "] = " << g << ", want " << sum
                      << " (err " << err << ", bound " << bound << ", sum|ab| " << abs_sum << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements out of bound";
  return worst;
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
    for (const int n : {64, 128}) {
      for (const int k : {16, 64, 128}) {
        const GemmCase c{n, k, v.b_mn, v.rs, v.swizzle, awkward};
        ++seed;
        // Runtime -> template: N, B major, form.
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

// ---- warp-specialised pipeline ---------------------------------------------------------

constexpr int kPipeStages = 2;
constexpr uint32_t kPipeABytes = 128 * 128;           // A stage: [128 rows][64 k] bf16
constexpr uint32_t kPipeBBytes = 2 * 64 * 128;        // B stage: 2 x [64 k rows][64 n]
constexpr uint32_t kPipeStageBytes = kPipeABytes + kPipeBBytes;
constexpr uint32_t kPipeSmem = kPipeStages * kPipeStageBytes + 1024;

// D[128, 128] = A[128, 64 k_steps] B[64 k_steps, 128]. WG 0: producer (one
// thread issues the TMA loads), WG 1 / 2: rows 0-63 / 64-127.
template <typename T>
__global__ void __launch_bounds__(384, 1)
    PipelineKernel(const __grid_constant__ CUtensorMap map_a,
                   const __grid_constant__ CUtensorMap map_b, float* d, int k_steps) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = AlignShared<1024>(smem_raw);
  __shared__ uint64_t full[kPipeStages];
  __shared__ uint64_t empty[kPipeStages];
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kPipeStages; ++s) {
      MbarrierInit(&full[s], 1);
      MbarrierInit(&empty[s], 256);  // every consumer thread releases
    }
    FenceMbarrierInit();
  }
  __syncthreads();

  if (wg == 0) {
    SetMaxNRegDecrease<40>();
    if (threadIdx.x == 0) {
      TmaPrefetchDescriptor(&map_a);
      TmaPrefetchDescriptor(&map_b);
      for (int s = 0; s < k_steps; ++s) {
        const int stage = s % kPipeStages;
        const uint32_t use = s / kPipeStages;
        WaitOrTrap(&empty[stage], (use & 1) ^ 1);  // use 0 passes at once
        uint8_t* sa = smem + stage * kPipeStageBytes;
        uint8_t* sb = sa + kPipeABytes;
        MbarrierArriveExpectTx(&full[stage], kPipeStageBytes);
        TmaLoad2D(sa, &map_a, &full[stage], 64 * s, 0);
        TmaLoad2D(sb, &map_b, &full[stage], 0, 64 * s);
        TmaLoad2D(sb + kPipeBBytes / 2, &map_b, &full[stage], 64, 64 * s);
      }
    }
  } else {
    SetMaxNRegIncrease<232>();
    const int c = wg - 1;
    const int t = threadIdx.x % 128;
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    const uint32_t base = SharedAddress32(smem);
    for (int s = 0; s < k_steps; ++s) {
      const int stage = s % kPipeStages;
      const uint32_t use = s / kPipeStages;
      WaitOrTrap(&full[stage], use & 1);
      const uint32_t sa = base + stage * kPipeStageBytes + c * 64 * 128;  // this WG's 64 rows
      const uint32_t sb = base + stage * kPipeStageBytes + kPipeABytes;
      WgmmaFenceOperands(acc);
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        WgmmaSs<T, 128, 1>(acc, AdvanceWgmmaDescriptor(WgmmaDescSw128KMajor(sa), 32 * kk),
                           WgmmaDescSw128MnMajor(sb + 2048 * kk, kPipeBBytes / 2), true);
      }
      WgmmaCommitGroup();
      WgmmaWaitGroup<0>();
      WgmmaFenceOperands(acc);
      MbarrierArrive(&empty[stage]);
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) d[(64 * c + AccRow(t, i)) * 128 + AccCol(t, i)] = acc[i];
  }
}

template <typename Type>
void RunPipeline() {
  SCOPED_TRACE(Type::kName);
  constexpr int kSteps = 8;
  constexpr int kK = 64 * kSteps;
  std::mt19937_64 rng(0x77aa);
  const std::vector<uint16_t> a = RandomValues<Type>(128 * kK, rng, false);  // [128][kK]
  const std::vector<uint16_t> b = RandomValues<Type>(kK * 128, rng, false);  // [kK][128]
  DeviceBuffer d_a(a.size() * 2), d_b(b.size() * 2), d_d(128 * 128 * 4);
  ASSERT_NE(d_d.ptr, nullptr);
  ASSERT_CUDA(cudaMemcpy(d_a.ptr, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d_b.ptr, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(d_d.ptr, 0xFF, 128 * 128 * 4));
  CUtensorMap map_a, map_b;
  ASSERT_CU(EncodeTensorMap2D(&map_a, Type::kMapType, d_a.ptr, 128, kK, kK * 2, 128, 64,
                              TmaSwizzle::k128B));
  ASSERT_CU(EncodeTensorMap2D(&map_b, Type::kMapType, d_b.ptr, kK, 128, 256, 64, 64,
                              TmaSwizzle::k128B));
  auto kernel = PipelineKernel<typename Type::Device>;
  ASSERT_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(kPipeSmem)));
  kernel<<<1, 384, kPipeSmem>>>(map_a, map_b, d_d.as<float>(), kSteps);
  ASSERT_CUDA(cudaGetLastError());
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<float> d(128 * 128);
  ASSERT_CUDA(cudaMemcpy(d.data(), d_d.ptr, d.size() * 4, cudaMemcpyDeviceToHost));
  const double worst = CheckProduct(
      d, 128, 128, kK, [&](int m, int kk) { return Type::ToFloat(a[m * kK + kk]); },
      [&](int kk, int j) { return Type::ToFloat(b[kk * 128 + j]); }, "pipeline");
  std::printf("  pipeline %s D[128,128] K=%d: worst err / (2^-23 sum|ab|) = %.3f (bound %d)\n",
              Type::kName, kK, worst, 2 * kK);
}

TEST_F(HopperTest, WarpSpecializedPipelineBf16) { RunPipeline<Bf16>(); }
TEST_F(HopperTest, WarpSpecializedPipelineFp16) { RunPipeline<F16>(); }

}  // namespace
}  // namespace gdn::cuda
