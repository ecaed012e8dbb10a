// The host-side layouts of kernels/cuda/common/wgmma.cuh (host only, run
// everywhere, no device needed): the descriptor bit fields, the SW128
// offset formula on hand-computed points, the accumulator layout is a
// bijection onto [64, N], and the accumulator -> A-fragment reuse lands
// every value on the A position the PTX A layout gives it.
#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/common/wgmma.cuh"

namespace gdn::cuda {
namespace {

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

}  // namespace
}  // namespace gdn::cuda
