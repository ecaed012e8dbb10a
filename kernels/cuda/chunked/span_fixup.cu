// Kernels of span_fixup.h. Pages are [Hv][K][V] (element (d, e) of head h
// at h K V + d V + e): the scratch pool's fp32, the real pool's any state
// dtype (state_pages.cuh; int8 / fp8 codes with fp32 column-pair scales
// after them); the maths in fp32.
#include "kernels/cuda/chunked/span_fixup.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/span_plan.h"
#include "kernels/cuda/chunked/state_pages.cuh"
#include "kernels/cuda/common/page_ids.cuh"
#include "kernels/state_quant.h"

namespace gdn::cuda::chunked {
namespace {

constexpr int kDim = 128;              // K = V
constexpr int kFixupCols = 16;         // V columns per fixup block
constexpr int kFixupThreads = 256;     // 128 rows x 2 halves of 8 columns
constexpr int64_t kHeadElems = int64_t{kDim} * kDim;

// Whether the sequence's real page ids (initial, final, checkpoints) are
// usable. Block-wide: every thread of the block calls it (the checkpoint
// slots are shared out over the threads; a long sequence at an interval of
// one chunk has hundreds).
__device__ __forceinline__ bool RealPagesUsable(const SpanFixupArgs& a) {
  const int ip = a.initial_pages[0], fp = a.final_pages[0];
  bool ok = GDN_PAGE_IN_POOL_OR_ZERO(ip, a.num_pages) && GDN_PAGE_IN_POOL(fp, a.num_pages);
  for (int m = threadIdx.x; m < a.checkpoint_count; m += blockDim.x) {
    ok &= GDN_PAGE_IN_POOL_OR_ZERO(a.checkpoint_pages[m], a.num_pages);
  }
  return __syncthreads_and(ok) != 0;
}

__global__ void SpanIdentityKernel(SpanFixupArgs a) {
  float* page = reinterpret_cast<float*>(a.scratch + SpanPages{a.spans}.identity() *
                                                         a.scratch_page_bytes);
  const int64_t n = kHeadElems * a.num_v_heads;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t within = i % kHeadElems;
    page[i] = within / kDim == within % kDim ? 1.0f : 0.0f;
  }
}

// grid (V / kFixupCols, Hv), kFixupThreads threads: thread t owns row
// d = t / 2 and columns c0 .. c0 + 7 (c0 = 8 (t % 2)) of the block's tile.
__global__ void __launch_bounds__(kFixupThreads) SpanFixupKernel(SpanFixupArgs a) {
  __shared__ float z[kDim][kFixupCols];
  const SpanPages pages{a.spans};
  const int h = blockIdx.y, col0 = blockIdx.x * kFixupCols;
  const int d = threadIdx.x / 2, c0 = (threadIdx.x % 2) * 8;
  const int64_t head = h * kHeadElems;
  const int64_t row_at = head + int64_t{d} * kDim + col0 + c0;  // (d, col0 + c0)
  auto scratch_page = [&a](int id) {
    return reinterpret_cast<float*>(a.scratch + id * a.scratch_page_bytes);
  };

  // Z_0: the initial page, zero, or NaN when the real page ids are unusable.
  const bool usable = RealPagesUsable(a);
  if (blockIdx.x == 0 && blockIdx.y == 0) {  // phase 3's checkpoint slots
    for (int m = threadIdx.x; m < a.checkpoint_count; m += blockDim.x) {
      a.checkpoint_copy[m] = usable ? a.checkpoint_pages[m] : kZeroStatePage;
    }
  }
  const int ip = a.initial_pages[0];
  const char* init = usable && ip != kZeroStatePage ? a.pool_base + ip * a.page_bytes : nullptr;
  float* z0 = scratch_page(pages.z(0));
  const int64_t codes_bytes = kHeadElems * a.num_v_heads;  // int8 / fp8 pages
  const int64_t col = int64_t{h} * kDim + col0 + c0;         // h V + the column
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float x = 0.0f;
    if (!usable) {
      x = __int_as_float(0x7fc00000);
    } else if (init != nullptr) {
      x = PageElement(init, a.state_dtype, row_at + i, codes_bytes, col + i);
    }
    z[d][c0 + i] = x;
    z0[row_at + i] = x;
  }
  for (int p = 0; p + 1 < a.spans; ++p) {
    __syncthreads();  // z holds Z_p
    const float* m = scratch_page(pages.m(p)) + head + int64_t{d} * kDim;  // row d of M_p
    const float* n = scratch_page(pages.n(p));
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = n[row_at + i];
#pragma unroll 2
    for (int j = 0; j < kDim; j += 4) {
      const float4 mj = *reinterpret_cast<const float4*>(m + j);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        acc[i] = fmaf(mj.x, z[j][c0 + i], acc[i]);
        acc[i] = fmaf(mj.y, z[j + 1][c0 + i], acc[i]);
        acc[i] = fmaf(mj.z, z[j + 2][c0 + i], acc[i]);
        acc[i] = fmaf(mj.w, z[j + 3][c0 + i], acc[i]);
      }
    }
    __syncthreads();  // every read of Z_p done
    float* next = scratch_page(pages.z(p + 1));
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      z[d][c0 + i] = acc[i];
      next[row_at + i] = acc[i];
    }
  }
}

// Four elements per thread and step: fp32 -> StateT (16 or 8 bytes).
template <typename StateT>
__global__ void SpanFinalCopyKernel(SpanFixupArgs a) {
  if (!RealPagesUsable(a)) return;
  const float4* src = reinterpret_cast<const float4*>(
      a.scratch + SpanPages{a.spans}.last() * a.scratch_page_bytes);
  char* dst = a.pool_base + a.final_pages[0] * a.page_bytes;
  const int64_t n = kHeadElems * a.num_v_heads / 4;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float4 x = src[i];
    if constexpr (sizeof(StateT) == 4) {
      reinterpret_cast<float4*>(dst)[i] = x;
    } else {
      __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(dst) + 2 * i;
      out[0] = __floats2bfloat162_rn(x.x, x.y);
      out[1] = __floats2bfloat162_rn(x.z, x.w);
    }
  }
}

// int8 / fp8 final page, grid (V / kFixupCols, Hv), kFixupThreads threads
// (thread t: row d = t / 2, columns c0 .. c0 + 7, c0 = 8 (t % 2), as the
// fixup): each column pair's max |x| over the K rows (state_quant.h AbsBits:
// NaN wins) by shuffles over the 16 lanes of a warp that share c0, then one
// shared atomicMax per warp and pair; then the codes (8 bytes per thread)
// and, from threads 0-7, the block's 8 scales.
__global__ void __launch_bounds__(kFixupThreads) SpanFinalQuantKernel(SpanFixupArgs a) {
  static_assert(kStateScaleCols == 2, "four pairs of columns per thread");
  __shared__ uint32_t amax_s[kFixupCols / kStateScaleCols];
  if (!RealPagesUsable(a)) return;
  const int h = blockIdx.y, col0 = blockIdx.x * kFixupCols;
  const int d = threadIdx.x / 2, c0 = (threadIdx.x % 2) * 8;
  if (threadIdx.x < kFixupCols / kStateScaleCols) amax_s[threadIdx.x] = 0;
  const int64_t at = h * kHeadElems + int64_t{d} * kDim + col0 + c0;  // element (d, col0 + c0)
  const float* src = reinterpret_cast<const float*>(
      a.scratch + SpanPages{a.spans}.last() * a.scratch_page_bytes);
  const float4 lo = *reinterpret_cast<const float4*>(src + at);
  const float4 hi = *reinterpret_cast<const float4*>(src + at + 4);
  const float x[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  uint32_t m[4];
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    m[p] = max(quant::AbsBits(x[2 * p]), quant::AbsBits(x[2 * p + 1]));
#pragma unroll
    for (int offset = 2; offset < 32; offset *= 2) {  // the lanes with this c0
      m[p] = max(m[p], __shfl_xor_sync(0xffffffffu, m[p], offset));
    }
  }
  __syncthreads();  // amax_s zeroed
  if ((threadIdx.x & 31) < 2) {
#pragma unroll
    for (int p = 0; p < 4; ++p) atomicMax(&amax_s[c0 / 2 + p], m[p]);
  }
  __syncthreads();
  const bool int8 = a.state_dtype == StateDType::kInt8;
  const float qmax = int8 ? quant::kInt8Max : quant::kFp8Max;
  const int64_t gi = a.last_token * a.num_v_heads + h;  // the last token's gates at head h
  const uint32_t salt =
      a.stochastic_rounding ? quant::RoundingSalt(a.salt_gate[gi], a.salt_strength[gi]) : 0u;
  uint32_t words[2] = {0u, 0u};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const quant::GroupScale gs = quant::GroupScaleFor(amax_s[c0 / 2 + j / 2], qmax);
    const uint32_t code = EncodePageCode(int8, x[j], gs.inv, a.stochastic_rounding, salt, at + j);
    words[j / 4] |= code << (8 * (j % 4));
  }
  char* dst = a.pool_base + a.final_pages[0] * a.page_bytes;
  *reinterpret_cast<uint2*>(dst + at) = make_uint2(words[0], words[1]);
  if (threadIdx.x < kFixupCols / kStateScaleCols) {
    float* scales = reinterpret_cast<float*>(dst + kHeadElems * a.num_v_heads);
    const int64_t pair = (int64_t{h} * kDim + col0) / kStateScaleCols + threadIdx.x;
    scales[pair] = quant::GroupScaleFor(amax_s[threadIdx.x], qmax).scale;
  }
}

template <template <typename> class Kernel>
cudaError_t Launch(const SpanFixupArgs& a, dim3 grid, int threads, cudaStream_t stream) {
  if (a.state_dtype == StateDType::kF32) {
    Kernel<float>::Launch(a, grid, threads, stream);
  } else if (a.state_dtype == StateDType::kBF16) {
    Kernel<__nv_bfloat16>::Launch(a, grid, threads, stream);
  } else {
    return cudaErrorNotSupported;
  }
  return cudaGetLastError();
}

template <typename StateT>
struct FinalCopy {
  static void Launch(const SpanFixupArgs& a, dim3 g, int t, cudaStream_t s) {
    SpanFinalCopyKernel<StateT><<<g, t, 0, s>>>(a);
  }
};

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

bool Valid(const SpanFixupArgs& a) {
  return a.scratch != nullptr && Aligned16(a.scratch) && a.spans >= 2 && a.num_v_heads > 0 &&
         a.scratch_page_bytes >= kHeadElems * a.num_v_heads * 4 &&
         a.scratch_page_bytes % 16 == 0 && a.pool_base != nullptr && Aligned16(a.pool_base) &&
         a.page_bytes % 16 == 0 && a.initial_pages != nullptr && a.final_pages != nullptr &&
         a.checkpoint_count >= 0 &&
         (a.checkpoint_count == 0 ||
          (a.checkpoint_pages != nullptr && a.checkpoint_copy != nullptr));
}

}  // namespace

cudaError_t LaunchSpanIdentity(const SpanFixupArgs& a, cudaStream_t stream) {
  if (!Valid(a)) return cudaErrorInvalidValue;
  SpanIdentityKernel<<<a.num_v_heads * 16, 256, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t LaunchSpanFixup(const SpanFixupArgs& a, cudaStream_t stream) {
  if (!Valid(a)) return cudaErrorInvalidValue;
  SpanFixupKernel<<<dim3(kDim / kFixupCols, a.num_v_heads), kFixupThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t LaunchSpanFinalCopy(const SpanFixupArgs& a, cudaStream_t stream) {
  if (!Valid(a)) return cudaErrorInvalidValue;
  if (IsQuantizedState(a.state_dtype)) {
    if (a.stochastic_rounding && (a.salt_gate == nullptr || a.salt_strength == nullptr)) {
      return cudaErrorInvalidValue;
    }
    SpanFinalQuantKernel<<<dim3(kDim / kFixupCols, a.num_v_heads), kFixupThreads, 0, stream>>>(
        a);
    return cudaGetLastError();
  }
  return Launch<FinalCopy>(a, dim3(a.num_v_heads * 8), 256, stream);
}

}  // namespace gdn::cuda::chunked
