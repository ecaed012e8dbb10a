// wgmma (sm_90a warpgroup MMA): shared-memory matrix descriptors, the
// m64nNk16 fp32-accumulating instructions for bf16 and fp16 inputs (N = 64,
// 128; A from shared memory "SS" or from registers "RS"), their
// fence / commit / wait protocol, the accumulator and A-fragment register
// layouts, and setmaxnreg. Compile for sm_90a (wgmma and setmaxnreg do not
// exist on plain sm_90 or other targets).
//
// ---- The operation ----------------------------------------------------------
// One warpgroup (128 threads, 4 consecutive warps, warp index % 4 = w)
// computes D[64, N] (+)= A[64, 16] * B[16, N] per instruction. "K" below is
// the reduction dimension, "MN" the M (A) or N (B) dimension.
//
// ---- Accumulator fragment (fp32 D, N / 2 floats per thread) ------------------
// Thread t of the warpgroup: w = t / 32 (warp), g = (t % 32) / 4 (group),
// q = t % 4 (thread in group). Element d[i], i in [0, N / 2):
//   row = 16 w + g + 8 * ((i / 2) % 2)
//   col = 8 * (i / 4) + 2 q + (i % 2)
// i.e. per 8-column block j = i / 4: d[4j + 0, 1] = (g, 8j + 2q + {0, 1}),
// d[4j + 2, 3] = (g + 8, same columns), rows offset by 16 w. AccRow / AccCol.
//
// ---- A fragment (RS form, 4 x .b32 = 8 16-bit values per thread) --------------
// Per k-step (16 columns of A): a[0] = (row 16w + g,     cols 2q, 2q + 1),
//                               a[1] = (row 16w + g + 8, cols 2q, 2q + 1),
//                               a[2] = (row 16w + g,     cols 2q + 8, 2q + 9),
//                               a[3] = (row 16w + g + 8, cols 2q + 8, 2q + 9),
// lower column in the lower 16 bits. This is the accumulator layout of
// columns [16 kk, 16 kk + 16) read as pairs: an fp32 accumulator D[64, N]
// becomes the A operand of a following wgmma with K = N without any data
// movement, k-step kk taking d[8 kk .. 8 kk + 7] (AccToFragmentA). That is
// how the v8 chain feeds S^T (an accumulator) back as A.
//
// ---- Shared-memory operands and descriptors ----------------------------------
// The tensor core reads A (SS form) and B from shared memory through a
// 64-bit descriptor (PTX ISA "Matrix Descriptor Format", wgmma):
//   bits  0-13  start address        (addr & 0x3FFFF) >> 4
//   bits 16-29  leading byte offset  (LBO) >> 4
//   bits 32-45  stride byte offset   (SBO) >> 4
//   bits 49-51  base offset          0 here: every swizzle atom 1024-aligned
//   bits 62-63  swizzle              0 none, 1 128B, 2 64B, 3 32B
// Both operands are described in "core matrices" of 8 rows x 16 bytes. What
// LBO and SBO mean depends on the major-ness (the fastest-varying dimension
// in memory) and the swizzle; the four layouts used here, for 16-bit types:
//
//   SW128, K-major (A [M][K] or B stored as [N][K], K contiguous):
//     the tile is split into 64-column (128-byte) blocks along K, each block
//     [rows][64] with 128-byte rows, 16-byte chunk c of row r stored at chunk
//     c ^ (r % 8) (exactly the TMA SWIZZLE_128B image of a (64, rows) box).
//     SBO = 1024 (8 rows x 128 B, the next 8 MN rows); LBO unused (the whole
//     k16 slice lies inside one 128-byte row; encoded as 1).
//     k-step kk: start = block (kk / 4) + 32 bytes x (kk % 4): the hardware
//     applies the XOR to the final address, so stepping inside the atom by
//     32 B is valid as long as the atom itself is 1024-aligned.
//   SW128, MN-major (B stored as [K][N], N contiguous):
//     64-column blocks along N, each [K rows][64], same swizzle.
//     LBO = byte distance between consecutive 64-wide N blocks (K x 128 for
//     a [K][64] block), SBO = 1024 (the next 8 K rows). k-step kk: start +=
//     16 rows x 128 B = 2048.
//   No swizzle, K-major: core matrix (8 MN rows x 8 K) = 128 contiguous
//     bytes, row r at 16 r. LBO = distance between the two K-adjacent core
//     matrices of a k16 slice, SBO = distance between MN-adjacent ones.
//   No swizzle, MN-major: core matrix (8 K rows x 8 MN) = 128 contiguous
//     bytes, K row r at 16 r. LBO = distance between K-adjacent core
//     matrices (K rows 0-7 -> 8-15), SBO = distance between MN-adjacent ones.
// (The swap of LBO / SBO roles between swizzled and non-swizzled MN-major is
// the PTX ISA's: LBO follows the "leading" dimension of the atom.)
// The offset helpers below (Sw128TileOffset, InterleavedKMajorOffset,
// InterleavedMnMajorOffset) give the byte offset of an element in each of
// these layouts; the descriptor helpers build the matching descriptors.
//
// ---- Issue protocol ----------------------------------------------------------
//   WgmmaFence();                  // before the first wgmma, and after any
//                                  // register write to an accumulator or A
//                                  // fragment that a wgmma will read
//   Wgmma...(d, ...) x k-steps;    // asynchronous; all 128 threads, converged
//   WgmmaCommitGroup();            // closes the batch
//   WgmmaWaitGroup<n>();           // at most n batches still in flight
//   // now d may be read
// WgmmaFenceOperands(d) around the batch keeps the compiler from moving
// reads or writes of the accumulator registers across the asynchronous
// instructions (the asm statements do not tell it they run late). In RS
// form the A registers are read asynchronously too: they must keep their
// values until the wait, so fence them (WgmmaFenceOperands(a)) after
// WgmmaWaitGroup as well, which keeps them live and unmodified until then.
// Shared memory written by threads must be fenced to the async proxy
// (FenceProxyAsyncShared in tma.cuh) and barrier-synchronised before a
// wgmma reads it; data a TMA load wrote is ready once its mbarrier wait
// returns.
#ifndef GDN_KERNELS_CUDA_COMMON_WGMMA_CUH_
#define GDN_KERNELS_CUDA_COMMON_WGMMA_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace gdn::cuda {

// ---- descriptors ---------------------------------------------------------------

enum class WgmmaSwizzle : uint32_t {
  kNone = 0,
  k128B = 1,
  k64B = 2,
  k32B = 3,
};

// Descriptor from a shared-memory byte address (as SharedAddress32) and the
// two byte offsets (multiples of 16, < 2^18). Base offset 0: the swizzle
// atoms of swizzled layouts must start 1024-byte aligned (128B mode).
__host__ __device__ constexpr uint64_t MakeWgmmaDescriptor(uint32_t smem_addr, uint32_t lbo_bytes,
                                                           uint32_t sbo_bytes,
                                                           WgmmaSwizzle swizzle) {
  return (static_cast<uint64_t>((smem_addr & 0x3FFFFu) >> 4)) |
         (static_cast<uint64_t>((lbo_bytes & 0x3FFFFu) >> 4) << 16) |
         (static_cast<uint64_t>((sbo_bytes & 0x3FFFFu) >> 4) << 32) |
         (static_cast<uint64_t>(swizzle) << 62);
}

// Moves a descriptor's start address by `bytes` (a multiple of 16; the sum
// stays below 256 KiB, so the 14-bit field does not carry).
__host__ __device__ constexpr uint64_t AdvanceWgmmaDescriptor(uint64_t desc, uint32_t bytes) {
  return desc + (bytes >> 4);
}

// SW128 K-major tile (A [M][K], or B as [N][K]) whose current 64-column
// block starts at `block_addr` (1024-aligned). k-step kk within the block:
// AdvanceWgmmaDescriptor(desc, 32 * kk).
__host__ __device__ constexpr uint64_t WgmmaDescSw128KMajor(uint32_t block_addr) {
  return MakeWgmmaDescriptor(block_addr, 16, 1024, WgmmaSwizzle::k128B);
}

// SW128 MN-major tile (B as [K][N]) starting at `addr` (1024-aligned, K row
// 0 of N block 0); N blocks of 64 columns lie `n_block_bytes` apart. k-step
// kk: AdvanceWgmmaDescriptor(desc, 2048 * kk).
__host__ __device__ constexpr uint64_t WgmmaDescSw128MnMajor(uint32_t addr,
                                                             uint32_t n_block_bytes) {
  return MakeWgmmaDescriptor(addr, n_block_bytes, 1024, WgmmaSwizzle::k128B);
}

// Non-swizzled K-major (core matrices of 8 MN rows x 16 bytes):
// `k_core_bytes` between K-adjacent core matrices, `mn_core_bytes` between
// MN-adjacent ones.
__host__ __device__ constexpr uint64_t WgmmaDescInterleavedKMajor(uint32_t addr,
                                                                  uint32_t k_core_bytes,
                                                                  uint32_t mn_core_bytes) {
  return MakeWgmmaDescriptor(addr, k_core_bytes, mn_core_bytes, WgmmaSwizzle::kNone);
}

// Non-swizzled MN-major (core matrices of 8 K rows x 16 bytes).
__host__ __device__ constexpr uint64_t WgmmaDescInterleavedMnMajor(uint32_t addr,
                                                                   uint32_t k_core_bytes,
                                                                   uint32_t mn_core_bytes) {
  return MakeWgmmaDescriptor(addr, k_core_bytes, mn_core_bytes, WgmmaSwizzle::kNone);
}

// ---- layouts: byte offset of a 16-bit element ---------------------------------

// Element (r, c) of a [rows][cols] tile (cols a multiple of 64) stored as
// cols / 64 blocks of [rows][64], block b at b * rows * 128 bytes, each the
// SWIZZLE_128B image of a TMA box (64, rows). K-major: r = MN, c = K;
// MN-major: r = K, c = MN.
__host__ __device__ constexpr uint32_t Sw128TileOffset(uint32_t r, uint32_t c, uint32_t rows) {
  return (c / 64) * rows * 128 + r * 128 + ((((c % 64) / 8) ^ (r % 8)) * 16) + (c % 8) * 2;
}

// Non-swizzled K-major, core matrices K-column by K-column: element (mn, k)
// of an [mn_extent][K] tile; k_core_bytes = mn_extent * 16, mn_core_bytes =
// 128.
__host__ __device__ constexpr uint32_t InterleavedKMajorOffset(uint32_t mn, uint32_t k,
                                                              uint32_t mn_extent) {
  return (k / 8) * (mn_extent * 16) + (mn / 8) * 128 + (mn % 8) * 16 + (k % 8) * 2;
}

// Non-swizzled MN-major, core matrices MN-column by MN-column: element
// (k, mn) of a [k_extent][MN] tile; k_core_bytes = 128, mn_core_bytes =
// k_extent * 16.
__host__ __device__ constexpr uint32_t InterleavedMnMajorOffset(uint32_t k, uint32_t mn,
                                                               uint32_t k_extent) {
  return (mn / 8) * (k_extent * 16) + (k / 8) * 128 + (k % 8) * 16 + (mn % 8) * 2;
}

// ---- fragment layouts -----------------------------------------------------------

// Row / column of accumulator element i held by warpgroup thread t (0..127).
__host__ __device__ constexpr int AccRow(int t, int i) {
  return 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
}
__host__ __device__ constexpr int AccCol(int t, int i) { return 8 * (i / 4) + 2 * (t % 4) + (i % 2); }

// Two fp32 -> one .b32 of two 16-bit values, `lo` in the lower half (the
// lower column). Round to nearest even; fp16 saturates to +-65504 (finite
// inputs never become inf), bf16 cannot overflow from finite fp32 except
// above its max, where it rounds to inf as IEEE says.
template <typename T>
__device__ __forceinline__ uint32_t PackPair(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t PackPair<__nv_bfloat16>(float lo, float hi) {
  uint32_t out;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(out) : "f"(hi), "f"(lo));
  return out;
}
template <>
__device__ __forceinline__ uint32_t PackPair<__half>(float lo, float hi) {
  uint32_t out;
  asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;\n" : "=r"(out) : "f"(hi), "f"(lo));
  return out;
}

// The A fragment of k-step kk from an fp32 accumulator (columns
// [16 kk, 16 kk + 16) of D become A's k-slice), rounded to T.
template <typename T, int kAccRegs>
__device__ __forceinline__ void AccToFragmentA(const float (&d)[kAccRegs], int kk,
                                               uint32_t (&a)[4]) {
  a[0] = PackPair<T>(d[8 * kk + 0], d[8 * kk + 1]);
  a[1] = PackPair<T>(d[8 * kk + 2], d[8 * kk + 3]);
  a[2] = PackPair<T>(d[8 * kk + 4], d[8 * kk + 5]);
  a[3] = PackPair<T>(d[8 * kk + 6], d[8 * kk + 7]);
}

// ---- protocol ---------------------------------------------------------------------

// Orders this warpgroup's earlier register and shared-memory accesses
// before the wgmma instructions that follow.
__device__ __forceinline__ void WgmmaFence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void WgmmaCommitGroup() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

// Waits until at most kPending committed batches of this warpgroup are in
// flight.
template <int kPending>
__device__ __forceinline__ void WgmmaWaitGroup() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Compiler-only barrier on each register of a fragment (no instruction).
template <int kRegs>
__device__ __forceinline__ void WgmmaFenceOperands(float (&d)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int kRegs>
__device__ __forceinline__ void WgmmaFenceOperands(uint32_t (&a)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// ---- setmaxnreg -------------------------------------------------------------------
// Per-warp register budget of a warp-specialised kernel: all warps of a
// warpgroup execute the same call. kRegs in [24, 256], a multiple of 8.
// .dec returns registers to the CTA's pool; .inc blocks until the pool has
// them. The kernel needs __launch_bounds__ (ptxas then allocates
// 64K / threads per thread at entry, and the .inc / .dec totals must fit
// that pool).
template <int kRegs>
__device__ __forceinline__ void SetMaxNRegIncrease() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg range");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void SetMaxNRegDecrease() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg range");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

// ---- instructions -------------------------------------------------------------------
// One wrapper per form x N x type, all generated from GDN_WGMMA_SS / RS
// below: d is the accumulator (N / 2 fp32), scale_d = 0 overwrites it
// (D = A B), 1 accumulates (D += A B). kTransB = 0: B K-major, 1: B
// MN-major. kScaleA / kScaleB = 1 or -1 negate an operand. SS: A K-major
// from shared memory.

template <typename T, int N>
struct WgmmaTag {};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The accumulator registers, operands %0 .. %(N / 2 - 1): their PTX vector
// and their asm output constraints, for N = 32 (16 registers; SS form only),
// 64 (32) and 128 (64).
#define GDN_WGMMA_D0_15                           \
  "%0, %1, %2, %3, %4, %5, %6, %7, "              \
  "%8, %9, %10, %11, %12, %13, %14, %15"
#define GDN_WGMMA_D0_31                           \
  GDN_WGMMA_D0_15 ", "                            \
  "%16, %17, %18, %19, %20, %21, %22, %23, "      \
  "%24, %25, %26, %27, %28, %29, %30, %31"
#define GDN_WGMMA_D32_63                          \
  "%32, %33, %34, %35, %36, %37, %38, %39, "      \
  "%40, %41, %42, %43, %44, %45, %46, %47, "      \
  "%48, %49, %50, %51, %52, %53, %54, %55, "      \
  "%56, %57, %58, %59, %60, %61, %62, %63"
#define GDN_WGMMA_ACC_N32 "{" GDN_WGMMA_D0_15 "}"
#define GDN_WGMMA_ACC_N64 "{" GDN_WGMMA_D0_31 "}"
#define GDN_WGMMA_ACC_N128 "{" GDN_WGMMA_D0_31 ", " GDN_WGMMA_D32_63 "}"
#define GDN_WGMMA_OUT_0_15                                                                     \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),         \
      "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
      "+f"(d[14]), "+f"(d[15])
#define GDN_WGMMA_OUT_0_31                                                                  \
  GDN_WGMMA_OUT_0_15, "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),     \
      "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]),        \
      "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define GDN_WGMMA_OUT_32_63                                                                 \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),            \
      "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),        \
      "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),        \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),        \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]),        \
      "+f"(d[62]), "+f"(d[63])
#define GDN_WGMMA_OUT_N32 GDN_WGMMA_OUT_0_15
#define GDN_WGMMA_OUT_N64 GDN_WGMMA_OUT_0_31
#define GDN_WGMMA_OUT_N128 GDN_WGMMA_OUT_0_31, GDN_WGMMA_OUT_32_63

// The operands after the accumulators are numbered from N / 2 in the order
// of the input list; the macros take those numbers (DA desc_a, DB desc_b,
// SD scale_d, SA kScaleA, SB kScaleB, TB kTransB, A0-A3 the A fragment).
// PTX_T is the PTX type ("bf16", "f16").
#define GDN_WGMMA_SS(T, PTX_T, N, DA, DB, SD, SA, SB, TB)                                       \
  template <int kTransB, int kScaleA, int kScaleB>                                              \
  __device__ __forceinline__ void WgmmaInstrSs(WgmmaTag<T, N>, float (&d)[N / 2],               \
                                               uint64_t desc_a, uint64_t desc_b,                \
                                               uint32_t scale_d) {                              \
    asm volatile("{\n.reg .pred p;\n"                                                           \
                 "setp.ne.b32 p, %" #SD ", 0;\n"                                                \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_T "." PTX_T " "          \
                 GDN_WGMMA_ACC_N##N ", "                                                        \
                 "%" #DA ", %" #DB ", p, %" #SA ", %" #SB ", 0, %" #TB ";\n}\n"                 \
                 : GDN_WGMMA_OUT_N##N                                                           \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kScaleA), "n"(kScaleB),          \
                   "n"(kTransB)                                                                 \
                 : "memory");                                                                   \
  }
#define GDN_WGMMA_RS(T, PTX_T, N, A0, A1, A2, A3, DB, SD, SA, SB, TB)                           \
  template <int kTransB, int kScaleA, int kScaleB>                                              \
  __device__ __forceinline__ void WgmmaInstrRs(WgmmaTag<T, N>, float (&d)[N / 2],               \
                                               const uint32_t (&a)[4], uint64_t desc_b,         \
                                               uint32_t scale_d) {                              \
    asm volatile("{\n.reg .pred p;\n"                                                           \
                 "setp.ne.b32 p, %" #SD ", 0;\n"                                                \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_T "." PTX_T " "          \
                 GDN_WGMMA_ACC_N##N ", "                                                        \
                 "{%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #DB ", p, %" #SA ", %" #SB       \
                 ", %" #TB ";\n}\n"                                                             \
                 : GDN_WGMMA_OUT_N##N                                                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),       \
                   "n"(kScaleA), "n"(kScaleB), "n"(kTransB)                                     \
                 : "memory");                                                                   \
  }

GDN_WGMMA_SS(__nv_bfloat16, "bf16", 32, 16, 17, 18, 19, 20, 21)
GDN_WGMMA_SS(__half, "f16", 32, 16, 17, 18, 19, 20, 21)
GDN_WGMMA_SS(__nv_bfloat16, "bf16", 64, 32, 33, 34, 35, 36, 37)
GDN_WGMMA_SS(__half, "f16", 64, 32, 33, 34, 35, 36, 37)
GDN_WGMMA_SS(__nv_bfloat16, "bf16", 128, 64, 65, 66, 67, 68, 69)
GDN_WGMMA_SS(__half, "f16", 128, 64, 65, 66, 67, 68, 69)
GDN_WGMMA_RS(__nv_bfloat16, "bf16", 64, 32, 33, 34, 35, 36, 37, 38, 39, 40)
GDN_WGMMA_RS(__half, "f16", 64, 32, 33, 34, 35, 36, 37, 38, 39, 40)
GDN_WGMMA_RS(__nv_bfloat16, "bf16", 128, 64, 65, 66, 67, 68, 69, 70, 71, 72)
GDN_WGMMA_RS(__half, "f16", 128, 64, 65, 66, 67, 68, 69, 70, 71, 72)

#undef GDN_WGMMA_RS
#undef GDN_WGMMA_SS
#undef GDN_WGMMA_OUT_N128
#undef GDN_WGMMA_OUT_N64
#undef GDN_WGMMA_OUT_N32
#undef GDN_WGMMA_OUT_32_63
#undef GDN_WGMMA_OUT_0_31
#undef GDN_WGMMA_OUT_0_15
#undef GDN_WGMMA_ACC_N128
#undef GDN_WGMMA_ACC_N64
#undef GDN_WGMMA_ACC_N32
#undef GDN_WGMMA_D32_63
#undef GDN_WGMMA_D0_31
#undef GDN_WGMMA_D0_15
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// D[64, N] (+)= A[64, 16] B[16, N], A and B in shared memory.
template <typename T, int N, int kTransB, int kScaleA = 1, int kScaleB = 1>
__device__ __forceinline__ void WgmmaSs(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                        bool accumulate) {
  static_assert(N == 32 || N == 64 || N == 128, "instantiated for N = 32, 64, 128");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  WgmmaInstrSs<kTransB, kScaleA, kScaleB>(WgmmaTag<T, N>{}, d, desc_a, desc_b,
                                          accumulate ? 1u : 0u);
#elif defined(__CUDA_ARCH__)
  static_assert(sizeof(T) == 0, "wgmma needs an sm_90a device pass");
#endif
}

// D[64, N] (+)= A[64, 16] B[16, N], A from registers (A-fragment layout
// above), B in shared memory.
template <typename T, int N, int kTransB, int kScaleA = 1, int kScaleB = 1>
__device__ __forceinline__ void WgmmaRs(float (&d)[N / 2], const uint32_t (&a)[4],
                                        uint64_t desc_b, bool accumulate) {
  static_assert(N == 64 || N == 128, "instantiated for N = 64, 128");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  WgmmaInstrRs<kTransB, kScaleA, kScaleB>(WgmmaTag<T, N>{}, d, a, desc_b, accumulate ? 1u : 0u);
#elif defined(__CUDA_ARCH__)
  static_assert(sizeof(T) == 0, "wgmma needs an sm_90a device pass");
#endif
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_COMMON_WGMMA_CUH_
