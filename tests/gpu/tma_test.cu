// TMA (kernels/cuda/common/tma.cuh) completing on an mbarrier
// (mbarrier.cuh), the loads the v8 chunked prefill is built on
// (bench/prefill/HOPPER_DESIGN.md §5 step 0):
//   TmaRoundTrip2D / 3D: [rows, 128] bf16 tiles (2-D map; and the v8 q/k/v
//   view [T, H, 128] as a 3-D map, one head per box) loaded as two (64,
//   64-row) SWIZZLE_128B boxes, completing on an mbarrier, then stored back
//   with TMA to another buffer. Bitwise: every element in range equals the
//   source; the last box runs past the tensor's end, the shared image reads
//   zero there (load fill) and the rows past the end of the destination
//   keep their sentinel (store clip); the shared image is exactly
//   Sw128TileOffset's swizzle (the layout the SW128 descriptors assume).
//
// Skips itself without an sm_90 device.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/common/mbarrier.cuh"
#include "kernels/cuda/common/tma.cuh"
#include "kernels/cuda/common/wgmma.cuh"
#include "tests/gpu/hopper_test_support.cuh"

namespace gdn::cuda {
namespace {

using hopper_test::DeviceBuffer;
using hopper_test::HopperTest;
using hopper_test::WaitOrTrap;

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

}  // namespace
}  // namespace gdn::cuda
