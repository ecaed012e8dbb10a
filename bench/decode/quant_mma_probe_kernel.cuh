// Probe (issue 19's decode target): one decode token over int8 state pages
// with the two reductions D^T k and D^T q on the integer tensor cores, the
// codes never leaving int8 for them. Its own kernel (the int8 codec of
// recurrent_quant.cuh), float64 reference and timing, against a
// device-to-device copy of the same bytes in the same run. Not wired into the
// server; it asks whether the instruction-bound int8 decode (14 issued
// instructions per state element at batch 256 on the H200,
// bench/results/2026-12-05-decode-quant-arms) reaches the copy-bandwidth bound
// this way (answer, 2026-12-05-h200-prefill-decode: no; it waits on memory).
//
// One CTA per (sequence, value head) item, kWarps (8 or 4) warps; K = V = 128;
// the page of an item: codes [d = K row][e = V column] int8 (e contiguous), then one fp32
// scale per column pair (e, e ^ 1), as kernels/gdn_types.h StatePageLayout.
//   1. The 16 KB of codes -> shared memory by 16-byte loads, swizzled (16-byte
//      chunk x of row d at x ^ (d & 7)); k, q normalised (k^, q^ with the
//      attention scale) and split into three int8 levels each (k^ ~ s0 l0 +
//      s1 l1 + s2 l2, s1 = s0 / 128, s2 = s1 / 128: ~2^-21 of max |k^|).
//   2. Warp w owns V columns [16 w, 16 w + 16) over all 128 K rows:
//      ldmatrix .trans of 16-bit words (two codes) gives lane (g = lane / 4,
//      c = lane % 4) the codes of rows d = 2c, 2c + 1 (+ 8 i per tile) and
//      columns e = 2g, 2g + 1: one scale pair. Two byte permutes per tile pair
//      make the A fragment of mma.m16n8k32.s8 with A row g <-> e = 2g, row
//      g + 8 <-> e = 2g + 1 and K index 4c + j <-> d = 2c + (j & 1) + 8 (j >> 1)
//      (the same permutation on the levels, B). C = [e][level]: four mma per
//      warp give every column's exact integer sums for the 8 levels.
//   3. Per column: a = f Ak, b = f Aq (f = exp(g) scale), u = beta (v - a),
//      o = b + (k^ . q^) u. Per element, in units of f: U' = code + k^_d u / f
//      (one PRMT + FADD to a float, one FFMA), the pair's max |U'| in the warp
//      (two shuffles), the code rint(U' 127 / M) by one FFMA with 1.5 2^23, its
//      low byte packed, stmatrix .trans back, 16-byte stores.
//
// The kernel and its constants; quant_mma_probe.cu checks and times it.
#ifndef GDN_BENCH_DECODE_QUANT_MMA_PROBE_KERNEL_CUH_
#define GDN_BENCH_DECODE_QUANT_MMA_PROBE_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/recurrent_quant.cuh"
#include "kernels/state_quant.h"

namespace gdn::bench::quant_mma_probe {

constexpr int kK = 128, kV = 128;
constexpr int kCodeBytes = kK * kV;  // 16 KB
constexpr int kPairs = kV / 2;       // scales per item
constexpr float kQMax = quant::kInt8Max;
constexpr float kMinAmax = quant::kMinGroupAmax;
constexpr float kEps = 1e-6f;

struct ProbeArgs {
  uint8_t* codes;     // [items][K][V]
  float* scales;      // [items][kPairs]
  const float* q;     // [items][K]
  const float* k;     // [items][K]
  const float* v;     // [items][V]
  const float* g;     // [items] log decay
  const float* beta;  // [items]
  float* o;           // [items][V]
  float attn_scale;
};

__device__ __forceinline__ uint32_t Smem32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ float WarpSum(float x) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) x += __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}
__device__ __forceinline__ float WarpMax(float x) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, m));
  return x;
}

// Byte offset of K index r (0..15) of a 16-row half in the B layout: lane
// (g, c) reads the word [c][g] whose byte j holds d = 2c + (j & 1) + 8 (j >> 1).
__device__ __forceinline__ int LevelByte(int r, int level) {
  const int c = (r & 7) >> 1, j = (r & 1) + 2 * (r >> 3);
  return (c * 8 + level) * 4 + j;
}

// kWarps warps per item (8: one 16-column chunk each, 64 codes per lane; 4: two
// chunks each, one after the other, so the per-item work is shared by half as
// many threads).
template <int kWarps>
__global__ void __launch_bounds__(32 * kWarps, 16 / kWarps) QuantMmaDecode(ProbeArgs a) {
  constexpr int kThreads = 32 * kWarps, kVectors = kCodeBytes / 16 / kThreads;
  __shared__ __align__(128) uint8_t tile[kCodeBytes];    // swizzled codes
  __shared__ __align__(16) uint32_t levels[4][2][4][8];  // [kb][half][c][level] words
  __shared__ float khat[kK];
  __shared__ float red[8][3];
  __shared__ float lscale[8];
  __shared__ float kq_dot;

  const int item = blockIdx.x;
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  const int g = lane >> 2, c = lane & 3;
  const uint8_t* page = a.codes + static_cast<int64_t>(item) * kCodeBytes;

  // 1. Codes in (4 x 16 B per thread, coalesced rows), swizzled.
  uint4 in[kVectors];
#pragma unroll
  for (int i = 0; i < kVectors; ++i) in[i] = reinterpret_cast<const uint4*>(page)[t + kThreads * i];
  const float gate = a.g[item], beta = a.beta[item];
  const float kx = t < kK ? a.k[item * kK + t] : 0.f;
  const float qx = t < kK ? a.q[item * kK + t] : 0.f;
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    const int vec = t + kThreads * i, d = vec >> 3, ch = vec & 7;
    *reinterpret_cast<uint4*>(tile + d * 128 + ((ch ^ (d & 7)) << 4)) = in[i];
  }
  for (int i = t; i < 4 * 2 * 4 * 8; i += kThreads) (&levels[0][0][0][0])[i] = 0u;
  // Norms and k . q (raw), over warps 0-3 (t < 128).
  {
    const float kk = WarpSum(kx * kx), qq = WarpSum(qx * qx), kq = WarpSum(kx * qx);
    if (lane == 0) red[w][0] = kk, red[w][1] = qq, red[w][2] = kq;
  }
  __syncthreads();
  const float kk = red[0][0] + red[1][0] + red[2][0] + red[3][0];
  const float qq = red[0][1] + red[1][1] + red[2][1] + red[3][1];
  const float kqr = red[0][2] + red[1][2] + red[3][2] + red[2][2];
  const float rk = rsqrtf(kk + kEps), rq = a.attn_scale * rsqrtf(qq + kEps);
  const float kh = kx * rk, qh = qx * rq;
  // Level scales from max |k^|, max |q^| (warps 0-3 hold them).
  {
    const float mk = WarpMax(fabsf(kh)), mq = WarpMax(fabsf(qh));
    __syncthreads();  // red reused
    if (lane == 0) red[w][0] = mk, red[w][1] = mq;
  }
  __syncthreads();
  if (t < kK) {
    const float mk = fmaxf(fmaxf(red[0][0], red[1][0]), fmaxf(red[2][0], red[3][0]));
    const float mq = fmaxf(fmaxf(red[0][1], red[1][1]), fmaxf(red[2][1], red[3][1]));
    const float sk0 = mk > 0.f ? mk / kQMax : 1.f, sq0 = mq > 0.f ? mq / kQMax : 1.f;
    const float sk[3] = {sk0, sk0 * 0x1p-7f, sk0 * 0x1p-14f};
    const float sq[3] = {sq0, sq0 * 0x1p-7f, sq0 * 0x1p-14f};
    if (t == 0) {
      for (int l = 0; l < 3; ++l) lscale[l] = sk[l], lscale[4 + l] = sq[l];
      lscale[3] = lscale[7] = 0.f;
      kq_dot = kqr * rk * rq;
    }
    khat[t] = kh;
    const int d = t, kb = d >> 5, half = (d >> 4) & 1, r = d & 15;
    uint8_t* lv = reinterpret_cast<uint8_t*>(&levels[kb][half][0][0]);
    float rk_rest = kh, rq_rest = qh;
    const float ik = __frcp_rn(sk0), iq = __frcp_rn(sq0);  // levels: any close quotient
#pragma unroll
    for (int l = 0; l < 3; ++l) {
      const float lk = rintf(rk_rest * ik * (1 << 7 * l)), lq = rintf(rq_rest * iq * (1 << 7 * l));
      rk_rest = fmaf(-lk, sk[l], rk_rest);
      rq_rest = fmaf(-lq, sq[l], rq_rest);
      lv[LevelByte(r, l)] = static_cast<uint8_t>(static_cast<int8_t>(lk));
      lv[LevelByte(r, 4 + l)] = static_cast<uint8_t>(static_cast<int8_t>(lq));
    }
  }
  __syncthreads();

  constexpr int kChunks = 8 / kWarps;
  for (int ch = w * kChunks; ch < (w + 1) * kChunks; ++ch) {
    // 2.-3. per 16-column chunk ch of this warp: ldmatrix .trans per 32 rows.
    uint32_t code[4][4];  // [kb][tile i]: rows 32 kb + 8 i + {2c, 2c+1}, columns {2g, 2g+1}
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) {
      const int d = 32 * kb + 8 * (lane >> 3) + (lane & 7);
      const uint32_t addr = Smem32(tile + d * 128 + ((ch ^ (d & 7)) << 4));
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(code[kb][0]), "=r"(code[kb][1]), "=r"(code[kb][2]), "=r"(code[kb][3])
                   : "r"(addr));
    }
    int acc[4] = {0, 0, 0, 0};
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) {
      const uint32_t a0 = __byte_perm(code[kb][0], code[kb][1], 0x6420);
      const uint32_t a1 = __byte_perm(code[kb][0], code[kb][1], 0x7531);
      const uint32_t a2 = __byte_perm(code[kb][2], code[kb][3], 0x6420);
      const uint32_t a3 = __byte_perm(code[kb][2], code[kb][3], 0x7531);
      const uint32_t b0 = levels[kb][0][c][g], b1 = levels[kb][1][c][g];
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
          "{%8, %9}, {%0, %1, %2, %3};\n"
          : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    // acc: [e = 2g][level 2c], [2g][2c+1], [2g+1][2c], [2g+1][2c+1].
    const float l0 = lscale[2 * c], l1 = lscale[2 * c + 1];
    float pe = fmaf(l1, static_cast<float>(acc[1]), l0 * static_cast<float>(acc[0]));
    float po = fmaf(l1, static_cast<float>(acc[3]), l0 * static_cast<float>(acc[2]));
    pe += __shfl_xor_sync(0xffffffffu, pe, 1);  // c 0-1: k sums, c 2-3: q sums
    po += __shfl_xor_sync(0xffffffffu, po, 1);
    const float xe = __shfl_xor_sync(0xffffffffu, pe, 2), xo = __shfl_xor_sync(0xffffffffu, po, 2);
    const float ak_e = c < 2 ? pe : xe, aq_e = c < 2 ? xe : pe;
    const float ak_o = c < 2 ? po : xo, aq_o = c < 2 ? xo : po;

    // Columns: e0 = 16 ch + 2g (pair 8 ch + g), e1 = e0 + 1.
    const int pair = 8 * ch + g, e0 = 2 * pair;
    const float sigma = a.scales[item * kPairs + pair];
    const float gamma = __expf(gate);
    const float f = gamma * sigma;
    const float u0 = beta * (a.v[item * kV + e0] - f * ak_e);
    const float u1 = beta * (a.v[item * kV + e0 + 1] - f * ak_o);
    if (c == 0) {
      a.o[item * kV + e0] = fmaf(kq_dot, u0, f * aq_e);
      a.o[item * kV + e0 + 1] = fmaf(kq_dot, u1, f * aq_o);
    }
    // Units: U' = code + k^_d u / f when f is a usable unit, else (tiny or
    // non-finite f) U' = code f + k^_d u with unit 1.
    // One choice per warp: in units of f only where every lane's f is usable.
    const bool units = __all_sync(0xffffffffu, f >= kMinAmax && f < INFINITY);
    const float unit = units ? f : 1.f;
    const float inv_f = __frcp_rn(f);
    const float w0 = units ? u0 * inv_f : u0, w1 = units ? u1 * inv_f : u1;
    float up[4][4][4];  // [kb][i][(d parity) * 2 + e parity]
    float m = 0.f;
    // Byte j of a word: (d = 2c + (j >> 1), e = 2g + (j & 1)).
    auto update = [&](auto scaled) {
#pragma unroll
      for (int kb = 0; kb < 4; ++kb) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 kd = *reinterpret_cast<const float2*>(&khat[32 * kb + 8 * i + 2 * c]);
          float codes[4];
          cuda::DecodeCodeWord<cuda::QInt8>(code[kb][i], codes);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            float x = codes[j];
            if constexpr (decltype(scaled)::value) x *= f;
            const float ud = fmaf((j >> 1) ? kd.y : kd.x, (j & 1) ? w1 : w0, x);
            up[kb][i][j] = ud;
            m = fmaxf(m, fabsf(ud));
          }
        }
      }
    };
    // In units of f: one FFMA per element.
    if (units) {
      update(std::false_type{});
    } else {
      update(std::true_type{});
    }
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    // New scale (kernels/state_quant.h GroupScaleFor on amax = unit * m).
    const float amax = unit * m;
    float new_scale, r;
    if (!(amax < INFINITY)) {
      new_scale = __int_as_float(0x7fc00000), r = 0.f;
    } else if (amax < kMinAmax) {
      new_scale = 1.f, r = 0.f;
    } else {
      new_scale = amax / kQMax, r = __fdividef(kQMax, m);  // |U'| r <= 127 (1 + 2^-21)
    }
    if (c == 0) a.scales[item * kPairs + pair] = new_scale;
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // recurrent_quant.cuh's EncodeNearestWord<QInt8> with the product fused
        // into the magic add (one FFMA a code; the host rounds y = U' r first,
        // hence the probe's one-step bar on codes near ties).
        uint32_t q[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) q[j] = __float_as_uint(fmaf(up[kb][i][j], r, 12582912.0f));
        code[kb][i] =
            __byte_perm(__byte_perm(q[0], q[1], 0x0040), __byte_perm(q[2], q[3], 0x0040), 0x5410);
      }
    }
    __syncwarp();  // the chunk's ldmatrix reads are done (no other warp touches it)
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) {
      const int d = 32 * kb + 8 * (lane >> 3) + (lane & 7);
      const uint32_t addr = Smem32(tile + d * 128 + ((ch ^ (d & 7)) << 4));
      asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
                   :
                   : "r"(addr), "r"(code[kb][0]), "r"(code[kb][1]), "r"(code[kb][2]),
                     "r"(code[kb][3])
                   : "memory");
    }
  }
  __syncthreads();
  uint8_t* out = a.codes + static_cast<int64_t>(item) * kCodeBytes;
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    const int vec = t + kThreads * i, d = vec >> 3, ch = vec & 7;
    reinterpret_cast<uint4*>(out)[vec] =
        *reinterpret_cast<const uint4*>(tile + d * 128 + ((ch ^ (d & 7)) << 4));
  }
}

}  // namespace gdn::bench::quant_mma_probe

#endif  // GDN_BENCH_DECODE_QUANT_MMA_PROBE_KERNEL_CUH_
