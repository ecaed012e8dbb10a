// FusedChunkKernel's (fused_chunk.cuh) launch constants, tensor maps and
// shared-memory layout, and the tile operations of its consumer
// warpgroups: transposed ldmatrix / stmatrix rows of SW128 tiles,
// accumulators as hi + lo A fragments, B descriptors, the state rows' page
// loads and stores, the consumer barrier and the fix-up of rescaled and
// padding q / k rows.
//
// ---- Shared memory (one ring stage; every tile 1024-byte aligned) -------------
//   qk    32 KB  [k block 0][q block 0][k block 1][q block 1], block b = K
//                columns [64 b, 64 b + 64) of 64 tokens, 8 KB, the SW128
//                image of a TMA box (64, 1, 64). Read K-major as one
//                N = 128 B operand per block for X (rows 0-63 k, 64-127 q:
//                SBO 1024 steps 8 rows, so q follows k), MN-major for the
//                update (N blocks 16 KB apart).
//   v     16 KB  [v block 0][v block 1], block w = V columns [64 w, 64 w + 64)
//   t_hi, t_lo, p  8 KB each: [64 rows i][64 columns j] SW128 (K-major B)
//   gates  1 KB  eg, ed [64] of (chunk, h); rq, rk [64] of (chunk, hq)
// Two stages (146 KB), then two o staging tiles (8 KB each, SW128, one per
// consumer): 162 KB + 1 KB alignment slack.
#ifndef GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_TILES_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_TILES_CUH_

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/mma_16bit.cuh"
#include "kernels/cuda/chunked/state_pages.cuh"
#include "kernels/cuda/common/page_ids.cuh"
#include "kernels/cuda/common/state_codes.cuh"
#include "kernels/cuda/common/wgmma.cuh"
#include "kernels/gdn_types.h"
#include "kernels/state_quant.h"

namespace gdn::cuda::chunked {

inline constexpr int kFusedThreads = 384;
inline constexpr int kFusedStages = 2;
inline constexpr int kFusedProducerRegs = 40;
inline constexpr int kFusedConsumerRegs = 232;  // 128 x (40 + 2 x 232) <= 64 K
// With the aux warpgroup (kAuxPrep): a fourth warpgroup, 128 x (32 + 2 x 192
// + 96) = 64 K registers (of the splits tried on the H100, the one with the
// fewest spills and the fastest step: bench/results/2026-12-06-aux-consumer-p).
inline constexpr int kFusedAuxThreads = 512;
inline constexpr int kFusedAuxProducerRegs = 32;
inline constexpr int kFusedAuxConsumerRegs = 192;
inline constexpr int kFusedAuxRegs = 96;

// The tensor maps of one call (host: fused_chunk.cu). Element types: q, k, v,
// t_hi, t_lo, p the input type; eg, ed, rq, rk fp32.
//   q, k  3-D (K, Hqk, T), box (64, 1, 64), SWIZZLE_128B
//   v     3-D (V, Hv, T),  box (64, 1, 64), SWIZZLE_128B
//   t_hi, t_lo, p  2-D (64, num_chunks * Hv * 64), box (64, 64), SWIZZLE_128B
//   eg, ed 2-D (64, num_chunks * Hv), rq, rk 2-D (64, num_chunks * Hqk),
//          box (64, 1), no swizzle
struct FusedChunkMaps {
  CUtensorMap q, k, v, t_hi, t_lo, p, eg, ed, rq, rk;
};

// Byte offsets in the dynamic shared memory (after AlignShared<1024>).
// Form P (TPrep's workspace) brings every tile of a stage but the decay by
// TMA; with the aux warpgroup (kAuxPrep) TMA brings q, k, v, the
// consumers write t_hi, t_lo (from the aux's T) and p, the producer's warps
// 1-3 and the aux the gate area (decay included), and the aux's scratch
// (FusedAuxSmem, fused_chunk_aux.cuh) follows the o staging tiles.
struct FusedChunkSmem {
  static constexpr uint32_t kQk = 0;
  static constexpr uint32_t kV = 32768;
  static constexpr uint32_t kTHi = 49152;
  static constexpr uint32_t kTLo = 57344;
  static constexpr uint32_t kP = 65536;
  // The gate area, in floats from kGates: eg [64] +0, ed [64] +64, rq [64]
  // +128, rk [64] +192, decay +256; with the aux warpgroup also its inputs
  // beyond (kAux* in fused_chunk_aux_inputs.cuh, 2816 bytes in all).
  static constexpr uint32_t kGates = 73728;
  static constexpr uint32_t kStageBytes = 76800;
  static constexpr uint32_t kTxBytes = 74752;  // form P: all of a stage but the decay
  // Bytes a chunk's loads bring: form P all of the above, or without q (2 x
  // 8 KB) and P (8 KB) for the state-only form (FusedChunkKernel<...,
  // kWithO = false>); with the aux warpgroup q, k, v only (no q without o).
  static constexpr __host__ __device__ uint32_t TxBytes(bool with_o, bool aux = false) {
    if (aux) return with_o ? 3 * 16384 : 2 * 16384;
    return with_o ? kTxBytes : kTxBytes - 2 * 8192 - 8192;
  }
  static constexpr uint32_t kOut = kFusedStages * kStageBytes;  // + 8192 w
  static constexpr uint32_t kAux = kOut + 2 * 8192;
  static constexpr uint32_t kBytes = kAux + 1024;  // + alignment slack
  static constexpr uint32_t kAuxBytes = kAux + 36864 + 1024;  // FusedAuxSmem::kBytes
  static_assert(kStageBytes % 1024 == 0, "stages 1024-aligned");
  static_assert(kTxBytes == 3 * 16384 + 3 * 8192 + 4 * 256, "stage = q, k, v, T'' x 2, P, gates");
};

// ldmatrix / stmatrix .x4 .trans on four 8 x 8 blocks of 16-bit values;
// `addr` is this lane's row address (lanes 8 r .. 8 r + 7: block r's rows).
// Thread (group g, tig q) gets / gives, per block r, the pair (column g of
// the memory block; rows 2 q, 2 q + 1), row 2 q in the lower half.
__device__ __forceinline__ void LdsmX4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void StsmX4Trans(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   addr),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// Address, for lane `lane` of warp `warp` of a consumer warpgroup, of the
// ldmatrix / stmatrix row that pass p2 (0..3) of a [64 tokens][64 columns]
// SW128 tile at `tile` touches. Pass p2 covers accumulator elements
// i = 8 p2 .. 8 p2 + 7 of an m64n64 accumulator whose rows are the tile's
// columns and whose columns are the tile's tokens: block r = lane / 8 is
// token block jb = 2 p2 + r / 2 and row half hh = r % 2 (rows
// 16 warp + 8 hh ..), so register r of the pass holds elements
// 8 p2 + 2 r, + 1 (the pair of tokens 8 jb + 2 q, + 1 at row 16 warp + 8 hh + g).
__device__ __forceinline__ uint32_t TransTileRow(uint32_t tile, int p2, int warp, int lane) {
  const int r = lane >> 3;
  const int j = 8 * (2 * p2 + (r >> 1)) + (lane & 7);
  const int chunk16 = 2 * warp + (r & 1);  // 16-byte chunk of the 128-byte row
  return tile + j * 128 + ((chunk16 ^ (j & 7)) << 4);
}

// AccToFragmentA (wgmma.cuh) in two parts: hi = the Op rounding of d, lo =
// the Op rounding of d - hi (d ~ hi + lo to ~2^-16 relative for bf16).
template <typename Op, int kAccRegs>
__device__ __forceinline__ void AccToFragmentAHiLo(const float (&d)[kAccRegs], int kk,
                                                   uint32_t (&hi)[4], uint32_t (&lo)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const float x0 = d[8 * kk + 2 * r], x1 = d[8 * kk + 2 * r + 1];
    hi[r] = PackPair<Op>(x0, x1);
    const float2 h = Unpack2<Op>(hi[r]);
    lo[r] = PackPair<Op>(x0 - h.x, x1 - h.y);
  }
}

// B descriptors. K-major SW128 block at `block` (N rows x 64 K), k-step kk < 4.
__device__ __forceinline__ uint64_t DescKMajor(uint32_t block, int kk) {
  return AdvanceWgmmaDescriptor(WgmmaDescSw128KMajor(block), 32 * kk);
}

// S^T [64 rows of this WG][K] from the initial page (head h; element (d, e)
// of the page at h K V + d V + e, e = V column = S^T row), in any page dtype
// (kernels/gdn_types.h StatePageLayout); zero for kZeroStatePage, NaN when
// the page ids are not usable.
// Every load is issued before any element is decoded: a decode right after
// its load, element by element (PageElement in the loop, a switch on the
// dtype each time), waited out 64 global loads one after another: +25% on
// the int8 / fp8 prefill of 8 x 1024 tokens (H100, 2026-12-05). The codes
// wait in s itself. Thread t's elements lie in V columns e_lo and e_lo + 8
// (one scale pair each: AccLayoutKeepsScalePairsInLaneOctets below), so two
// scales serve all 64 codes. (One pass over all four dtypes spilled five
// registers of the main loop.)
// kQuant: int8 / fp8 pages too (else fp32 / bf16 only).
template <int K, int V, bool kQuant>
__device__ __forceinline__ void LoadStateRows(float (&s)[64], const ChunkArgs& args, int ip,
                                              bool pages_ok, int h, int row0, int t) {
  if (!pages_ok || ip == kZeroStatePage) {
    const float fill = pages_ok ? 0.f : __int_as_float(0x7fc00000);
#pragma unroll
    for (int i = 0; i < 64; ++i) s[i] = fill;
    return;
  }
  const char* page = args.pool_base + ip * args.page_bytes;
  const int64_t head = static_cast<int64_t>(h) * K * V;
  auto at = [&](int i) {
    return head + static_cast<int64_t>(AccCol(t, i)) * V + row0 + AccRow(t, i);
  };
  if constexpr (kQuant) {
    if (IsQuantizedState(args.state_dtype)) {
      // int8 / fp8: the codes first, all loads in flight ...
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        s[i] = __uint_as_float(reinterpret_cast<const uint8_t*>(page)[at(i)]);
      }
      // ... then each code times its pair's scale.
      const float* scales =
          reinterpret_cast<const float*>(page + static_cast<int64_t>(args.num_v_heads) * K * V);
      const int64_t col = static_cast<int64_t>(h) * V + row0 + AccRow(t, 0);  // e_lo
      const float scale[2] = {scales[col / kStateScaleCols], scales[(col + 8) / kStateScaleCols]};
      if (args.state_dtype == StateDType::kInt8) {  // one loop per dtype
#pragma unroll
        for (int i = 0; i < 64; ++i) {
          const int8_t code = static_cast<int8_t>(__float_as_uint(s[i]));
          s[i] = quant::DecodeInt8(code) * scale[(i >> 1) & 1];
        }
      } else {
#pragma unroll
        for (int i = 0; i < 64; ++i) {
          const uint8_t code = static_cast<uint8_t>(__float_as_uint(s[i]));
          s[i] = quant::DecodeFp8(code) * scale[(i >> 1) & 1];
        }
      }
      return;
    }
  }
  const bool f32 = args.state_dtype == StateDType::kF32;
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    s[i] = f32 ? reinterpret_cast<const float*>(page)[at(i)]
               : __bfloat162float(reinterpret_cast<const bf16*>(page)[at(i)]);
  }
}

// What StoreQuantStateRows and LoadStateRows rely on in the m64nN
// accumulator layout (wgmma.cuh AccRow / AccCol), checked at compile time for a warpgroup's
// 128 threads and an m64n128 accumulator's 64 elements: element i's row (V
// column) depends only on the thread and (i / 2) % 2; lanes t ^ 1, t ^ 2,
// t ^ 3 hold the same rows and, with t, each K column once; lane t ^ 4 holds
// the other row of each pair (row ^ 1); lanes with t % 8 == 0 hold even rows.
constexpr bool AccLayoutKeepsScalePairsInLaneOctets() {
  for (int t = 0; t < 128; ++t) {
    for (int i = 0; i < 64; ++i) {
      if (AccRow(t, i) != AccRow(t, 2 * ((i / 2) % 2))) return false;
      if (AccRow(t ^ 1, i) != AccRow(t, i) || AccRow(t ^ 2, i) != AccRow(t, i)) return false;
      if (AccRow(t ^ 4, i) != (AccRow(t, i) ^ 1)) return false;
    }
    if (AccRow(t, 2) != AccRow(t, 0) + 8) return false;  // the second pair: e_lo + 8
    if (t % 8 == 0 && AccRow(t, 0) % 2 != 0) return false;
    // The quad's K columns for one row: 4 lanes x 32 elements, 128 distinct.
    bool seen[128] = {};
    for (int lane = t & ~3; lane < (t & ~3) + 4; ++lane) {
      for (int i = 0; i < 64; ++i) {
        if ((i / 2) % 2 != 0) continue;  // one of the two rows
        if (seen[AccCol(lane, i)]) return false;
        seen[AccCol(lane, i)] = true;
      }
    }
    for (bool b : seen) {
      if (!b) return false;
    }
  }
  return true;
}
static_assert(AccLayoutKeepsScalePairsInLaneOctets(),
              "StoreQuantStateRows' shuffles (xor 1, 2, 4) and scale lanes no longer match "
              "the accumulator layout");

// int8 / fp8 store of this WG's S^T rows (kernels/state_quant.h, the same
// arithmetic as v7's StoreQuantStatePage): thread t holds V columns e_lo =
// row0 + AccRow(t, 0) and e_lo + 8, each over the 32 K rows AccCol(t, i);
// the 4 lanes of a group (tig) hold all 128 K of those columns, and lane ^ 4
// the other column of each scale pair (e ^ 1). So max |x| of a pair is
// three shuffles away (xor 1, 2, 4): no shared memory, no barrier. Codes go
// out one byte each (the final state is stored once per sequence), scales
// from the lanes of even groups with tig 0. last_token: the state's last
// token, whose gates salt stochastic rounding.
template <int K, int V>
__device__ __forceinline__ void StoreQuantStateRows(const float (&s)[64], const ChunkArgs& args,
                                                    char* page, bool int8, int h, int row0,
                                                    int t, int64_t last_token) {
  static_assert(kStateScaleCols == 2, "a column pair per scale: lanes 4 apart");
  const int lane = t & 31;
  uint32_t m[2] = {0u, 0u};  // [0]: column e_lo, [1]: e_lo + 8
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int half = (i >> 1) & 1;
    m[half] = max(m[half], quant::AbsBits(s[i]));
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
#pragma unroll
    for (int offset = 1; offset <= 4; offset *= 2) {
      m[half] = max(m[half], __shfl_xor_sync(0xffffffffu, m[half], offset));
    }
  }
  const bool stochastic = args.stochastic_rounding;
  const uint32_t salt = stochastic ? StoreSalt(args, last_token, h) : 0u;
  const float qmax = int8 ? quant::kInt8Max : quant::kFp8Max;
  const quant::GroupScale gs[2] = {quant::GroupScaleFor(m[0], qmax),
                                   quant::GroupScaleFor(m[1], qmax)};
  const int64_t head = static_cast<int64_t>(h) * K * V;
  auto at = [&](int i) {
    return head + static_cast<int64_t>(AccCol(t, i)) * V + row0 + AccRow(t, i);
  };
  // One loop per (dtype, rounding), no per-element switch: the nearest
  // loops are a multiply, an add or a cvt per pair, and a byte store
  // (common/state_codes.cuh). Elements i and i + 1 share a row (the pair's
  // scale), so fp8 converts them in one cvt.
  const bool finite = m[0] < 0x7f800000u && m[1] < 0x7f800000u;
  if (!stochastic && finite && int8) {
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const float y = __fmul_rn(s[i], gs[(i >> 1) & 1].inv);
      page[at(i)] = static_cast<char>(Int8NearestBits(y));
    }
  } else if (!stochastic && finite) {
#pragma unroll
    for (int i = 0; i < 64; i += 2) {
      const float inv = gs[(i >> 1) & 1].inv;
      const uint16_t pair = Fp8PairNearest(__fmul_rn(s[i], inv), __fmul_rn(s[i + 1], inv));
      page[at(i)] = static_cast<char>(pair);
      page[at(i + 1)] = static_cast<char>(pair >> 8);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int64_t a = at(i);
      page[a] =
          static_cast<char>(EncodePageCode(int8, s[i], gs[(i >> 1) & 1].inv, stochastic, salt, a));
    }
  }
  if ((lane & 7) == 0) {  // tig 0 of an even group: e_lo even
    float* scales = reinterpret_cast<float*>(page + static_cast<int64_t>(args.num_v_heads) * K * V);
    const int64_t pair = (static_cast<int64_t>(h) * V + row0 + AccRow(t, 0)) / kStateScaleCols;
    scales[pair] = gs[0].scale;
    scales[pair + 8 / kStateScaleCols] = gs[1].scale;  // column e_lo + 8
  }
}

// S^T rows into a page of `dtype` (the final page or a checkpoint's; int8
// / fp8 through StoreQuantStateRows, kQuant only). Every consumer thread
// calls it (the quantized store shuffles within warps).
template <int K, int V, bool kQuant>
__device__ __forceinline__ void StoreStateRows(const float (&s)[64], const ChunkArgs& args,
                                               char* page, StateDType dtype, int h, int row0,
                                               int t, int64_t last_token) {
  if (kQuant && IsQuantizedState(dtype)) {
    StoreQuantStateRows<K, V>(s, args, page, dtype == StateDType::kInt8, h, row0, t,
                              last_token);
    return;
  }
  const int64_t head = static_cast<int64_t>(h) * K * V;
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int64_t at = head + static_cast<int64_t>(AccCol(t, i)) * V + row0 + AccRow(t, i);
    if (dtype == StateDType::kF32) {
      reinterpret_cast<float*>(page)[at] = s[i];
    } else {
      reinterpret_cast<bf16*>(page)[at] = __float2bfloat16_rn(s[i]);
    }
  }
}

// Named barrier over one consumer warpgroup (ids 1, 2; 0 is __syncthreads).
__device__ __forceinline__ void ConsumerBarrier(int w) {
  if (w == 0) {
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
  } else {
    asm volatile("bar.sync 2, 128;\n" ::: "memory");
  }
}

// Named barrier 3 over both consumer warpgroups (256 threads).
__device__ __forceinline__ void ConsumersBarrier() {
  asm volatile("bar.sync 3, 256;\n" ::: "memory");
}

// Rows of a stage's raw q / k tiles that the chunk's gate factors cannot
// tame, set right in place before any wgmma reads them:
// - rows TPrep rescaled (tprep_args.h: their fp32 sum of squares
//   overflowed, so TPrep normalised the row times kL2NormRescale and reported
//   its inverse norm negated; the tile's `rescaled` flag): scaled by
//   kL2NormRescale here too (exact, a power of two);
// - padding rows (j >= L: the next sequence's tokens, which TMA loads too):
//   zeroed. Their factors are 0, but S^T k of a huge finite row can be inf,
//   and 0 * inf would be NaN in every column of U'.
// Consumer warpgroup w takes the half of both tiles with columns 64 w ..,
// thread t (0..127) row t / 2 of k (t even) or q (t odd), all 128 bytes of
// it (the 128-byte swizzle only permutes a row's 16-byte chunks). Then a
// proxy fence (wgmma reads through the async proxy) and named barrier 3 over
// both consumer warpgroups. Only flagged tiles and sequences' last chunks
// come here. kWithQ false (the state-only form, which loads no q): the q rows
// are left alone.
template <typename Op, bool kWithQ = true>
__device__ __forceinline__ void FixTileRows(uint8_t* stage_smem, const float* gates, int L, int w,
                                            int t) {
  const int j = t >> 1;
  const bool is_q = (t & 1) != 0;
  uint4* row = reinterpret_cast<uint4*>(stage_smem + FusedChunkSmem::kQk + 16384 * w +
                                        (is_q ? 8192 : 0) + 128 * j);
  if (!kWithQ && is_q) {
    // nothing: this tile was not loaded
  } else if (j >= L) {
#pragma unroll
    for (int e = 0; e < 8; ++e) row[e] = make_uint4(0u, 0u, 0u, 0u);
  } else if (gates[(is_q ? 128 : 192) + j] < 0.f) {  // rq at +128, rk at +192 floats
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      uint4 piece = row[e];
      uint32_t* words = reinterpret_cast<uint32_t*>(&piece);
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const float2 x = Unpack2<Op>(words[p]);
        words[p] = Pack2<Op>(x.x * kL2NormRescale, x.y * kL2NormRescale);
      }
      row[e] = piece;
    }
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  ConsumersBarrier();
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_FUSED_CHUNK_TILES_CUH_
