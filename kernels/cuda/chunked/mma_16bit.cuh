// Warp-level tensor-core building blocks of the chunked prefill: the
// mma.sync m16n8k16 bf16 / fp16 -> fp32 instructions, their fragment loads
// from shared memory, tile copies (cp.async, kernels/cuda/common/cp_async.cuh)
// and element conversions.
//
// The operand type Op (OperandFor below) is bf16 for bf16 inputs and fp16
// for fp16 inputs (3 more mantissa bits, the inputs' own precision; values past
// fp16's range saturate to +-65504 instead of becoming inf, so finite inputs
// never give NaN). Every workspace tile and shared-memory operand of a call
// has that type.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 .bf16 / .f16), lane = 4 * group + tig:
//   A [16 x 16] row-major:  a[0] = (row group,     cols 2 tig, 2 tig + 1)
//                           a[1] = (row group + 8, cols 2 tig, 2 tig + 1)
//                           a[2] = (row group,     cols 2 tig + 8, + 9)
//                           a[3] = (row group + 8, cols 2 tig + 8, + 9)
//   B [16 x 8] (k x n):     b[0] = (k 2 tig, 2 tig + 1;     col group)
//                           b[1] = (k 2 tig + 8, 2 tig + 9; col group)
//   C [16 x 8] fp32:        c[0], c[1] = (row group,     cols 2 tig, 2 tig + 1)
//                           c[2], c[3] = (row group + 8, cols 2 tig, 2 tig + 1)
// Both operands are read from shared memory with the reduction index k
// contiguous: A as [m][k], B as its transpose [n][k]. Each 32-bit register
// holds two 16-bit elements, the lower index in the lower half (little
// endian). Row strides are padded to (multiple of 64) + 8 elements so that
// the 8 rows a fragment load touches fall in different banks.
#ifndef GDN_KERNELS_CUDA_CHUNKED_MMA_16BIT_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_MMA_16BIT_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common/cp_async.cuh"
#include "kernels/cuda/common/vector_access.cuh"

namespace gdn::cuda::chunked {

using bf16 = __nv_bfloat16;

// The tensor-core operand type for inputs of type In (see above).
template <typename In>
using OperandFor = std::conditional_t<std::is_same_v<In, __half>, __half, bf16>;

// c += a * b (fp32 accumulate), a and b of type Op.
template <typename Op>
__device__ __forceinline__ void Mma16816(float c[4], const uint32_t a[4],
                                         const uint32_t b[2]) {
  static_assert(std::is_same_v<Op, bf16> || std::is_same_v<Op, __half>, "bf16 or fp16");
  if constexpr (std::is_same_v<Op, bf16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

// ---- ldmatrix (sm_75+): the fragments above, one instruction per 2 or 4 8x8 ----
// Every lane gives the shared-memory address of one 8-element (16-byte,
// 16-byte aligned) row; lanes 8 m .. 8 m + 7 address matrix m, which lands in
// register m. Row strides of (multiple of 64) + 8 bf16 keep the 8 rows of a
// matrix in distinct banks.

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A fragment of the 16 x 16 tile at `tile` (row-major, `stride` elements).
template <typename T>
__device__ __forceinline__ void LdsmA(uint32_t a[4], const T* tile, int stride, int lane) {
  const T* p = tile + (lane & 15) * stride + (lane >> 4) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(SharedAddress(p)));
}

// B fragments of two adjacent 8-column n-tiles (16 k x 16 n) whose transpose
// ([n][k], k contiguous) is at `tile_t`: b[0..1] n-tile 0, b[2..3] n-tile 1
// (as LdsmB1 at tile_t and tile_t + 8 stride).
template <typename T>
__device__ __forceinline__ void LdsmB2(uint32_t b[4], const T* tile_t, int stride, int lane) {
  const T* p = tile_t + ((lane & 7) + ((lane >> 4) << 3)) * stride + ((lane >> 3) & 1) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
               : "r"(SharedAddress(p)));
}

// The B fragment of the 16 (k) x 8 (n) tile whose transpose is at `tile_t`
// ([n][k], `stride` elements per n row), by ldmatrix .x2: lanes 0-7 address k 0-7 of the
// 8 n rows, lanes 8-15 k 8-15 (lanes 16-31: ignored, valid addresses).
template <typename T>
__device__ __forceinline__ void LdsmB1(uint32_t b[2], const T* tile_t, int stride, int lane) {
  const T* p = tile_t + (lane & 7) * stride + ((lane >> 3) & 1) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(SharedAddress(p)));
}

// The same two B fragments from the tile stored as [k][n] (n contiguous) at
// `tile`: a transposing load, no copy of the transpose needed.
template <typename T>
__device__ __forceinline__ void LdsmB2Trans(uint32_t b[4], const T* tile, int stride,
                                            int lane) {
  const T* p = tile + ((lane & 7) + ((lane >> 3) & 1) * 8) * stride + (lane >> 4) * 8;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
               : "r"(SharedAddress(p)));
}

// Four 8 x 8 matrices at rows `row0 + 8 m` (m = 0..3), columns col0..col0+7 of
// the [rows][cols] tile, transposed: lane 4 g + t gets, in register m,
// tile[row0 + 8 m + 2 t][col0 + g] (lower half) and tile[row0 + 8 m + 2 t + 1][col0 + g].
template <typename T>
__device__ __forceinline__ void LdsmTrans4Rows(uint32_t r[4], const T* tile, int stride,
                                               int row0, int col0, int lane) {
  const T* p = tile + (row0 + lane) * stride + col0;  // lane = 8 m + row in matrix m
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(p)));
}

// ---- the C (accumulator) fragment layout in bf16, to and from shared memory ----
// A 16 x 8 block of a [rows][cols] bf16 tile in the layout of an mma C
// fragment: lane 4 g + t holds r[0] = (row g, cols 2 t, 2 t + 1) and r[1] =
// (row g + 8, same cols), two bf16 each (ldmatrix, sm_75+).
template <typename T>
__device__ __forceinline__ void LdsmAcc16x8(uint32_t r[2], const T* tile, int stride,
                                            int lane) {
  const T* p = tile + (lane & 15) * stride;  // lanes 16-31: ignored, valid addresses
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(SharedAddress(p)));
}

// The transpose of a 16 x 8 block held in the C-fragment layout (r[0] rows
// 0-7, r[1] rows 8-15, as LdsmAcc16x8) into the [cols][rows] tile at
// `tile_t`: tile_t[j * stride + i] = block[i][j] (stmatrix .trans, sm_90).
// Two such blocks at once (x4): r[2], r[3] the block whose transpose starts
// 8 rows (of tile_t) further.
template <typename T>
__device__ __forceinline__ void StsmTrans16x8(T* tile_t, int stride, const uint32_t r[2],
                                              int lane) {
  const T* p = tile_t + (lane & 7) * stride + ((lane >> 3) & 1) * 8;
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n"
               ::"r"(SharedAddress(p)), "r"(r[0]), "r"(r[1])
               : "memory");
}
template <typename T>
__device__ __forceinline__ void StsmTrans16x8Pair(T* tile_t, int stride, const uint32_t r[4],
                                                  int lane) {
  const T* p = tile_t + ((lane & 7) + ((lane >> 4) << 3)) * stride + ((lane >> 3) & 1) * 8;
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
               ::"r"(SharedAddress(p)), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// ---- operand registers: two fp32 <-> one 32-bit register of two Op -----------

// Two fp32 -> one register of two Op (lo in the lower half), round to
// nearest; fp16 saturates at +-65504 (cvt .satfinite, sm_80+: NaN stays NaN).
template <typename Op>
__device__ __forceinline__ uint32_t Pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<Op, bf16>) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    static_assert(std::is_same_v<Op, __half>, "bf16 or fp16");
    asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// The two Op of a register as fp32 (x: the lower half).
template <typename Op>
__device__ __forceinline__ float2 Unpack2(uint32_t r) {
  if constexpr (std::is_same_v<Op, bf16>) {
    return make_float2(__uint_as_float(r << 16), __uint_as_float(r & 0xffff0000u));
  } else {
    static_assert(std::is_same_v<Op, __half>, "bf16 or fp16");
    return __half22float2(*reinterpret_cast<const __half2*>(&r));
  }
}

// One fp32 -> Op, as Pack2 rounds it.
template <typename Op>
__device__ __forceinline__ Op OpFromFloat(float x) {
  if constexpr (std::is_same_v<Op, bf16>) {
    return __float2bfloat16_rn(x);
  } else {
    static_assert(std::is_same_v<Op, __half>, "bf16 or fp16");
    unsigned short r;
    asm("cvt.rn.satfinite.f16.f32 %0, %1;\n" : "=h"(r) : "f"(x));
    return __ushort_as_half(r);
  }
}

// Two adjacent Op (even index) stored at once, rounded as Pack2.
template <typename Op>
__device__ __forceinline__ void StoreOpPair(Op* p, float x0, float x1) {
  *reinterpret_cast<uint32_t*>(p) = Pack2<Op>(x0, x1);
}

// Copies a [kRows x kCols] tile of 16-bit elements (global rows `gstride`
// apart, kCols a multiple of 8) into shared memory rows `sstride` apart, all
// threads of the block sharing the 16-byte pieces: a fully unrolled loop
// without divisions (kThreads divides the pieces or the tail is guarded).
template <int kThreads, int kRows, int kCols, typename T>
__device__ __forceinline__ void CpAsyncTileStatic(T* smem, int sstride, const T* gmem,
                                                  int64_t gstride) {
  static_assert(sizeof(T) == 2, "16-bit elements");
  constexpr int kPerRow = kCols / 8, kPieces = kRows * kPerRow;
#pragma unroll
  for (int i = 0; i < (kPieces + kThreads - 1) / kThreads; ++i) {
    const int p = threadIdx.x + i * kThreads;
    if (kPieces % kThreads == 0 || p < kPieces) {
      const int r = p / kPerRow, c = (p % kPerRow) * 8;
      CopyAsync16(smem + r * sstride + c, gmem + r * gstride + c);
    }
  }
}

// kk += k k^T and qk += q k^T for one warp's 16 x 32 tile of a chunk
// (rows 16 mt .., columns 32 nh ..: four 8-column n-tiles, the m16n8k16
// accumulator layout): kb, qb [64][stride] Op in shared memory, K columns.
// The chunk kernels' phase 1 (v7's chunk_prep_blocked.cuh, TPrep).
template <int K, typename Op>
__device__ __forceinline__ void KkQkWarpTile(const Op* kb, const Op* qb, int stride, int mt, int nh,
                                             int lane, float (&kk)[4][4], float (&qk)[4][4]) {
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks) {
    uint32_t ak[4], aq[4];
    LdsmA(ak, kb + mt * 16 * stride + ks * 16, stride, lane);
    LdsmA(aq, qb + mt * 16 * stride + ks * 16, stride, lane);
#pragma unroll
    for (int np = 0; np < 2; ++np) {
      uint32_t bf[4];
      LdsmB2(bf, kb + (nh * 32 + np * 16) * stride + ks * 16, stride, lane);
      Mma16816<Op>(kk[2 * np], ak, bf);
      Mma16816<Op>(kk[2 * np + 1], ak, bf + 2);
      Mma16816<Op>(qk[2 * np], aq, bf);
      Mma16816<Op>(qk[2 * np + 1], aq, bf + 2);
    }
  }
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_MMA_16BIT_CUH_
