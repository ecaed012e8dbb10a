// Kernels of span_fixup.h. Pages are [Hv][K][V] (element (d, e) of head h
// at h K V + d V + e), fp32 or bf16; the maths in fp32.
#include "kernels/cuda/chunked/span_fixup.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/chunked/span_plan.h"
#include "kernels/cuda/common/page_ids.cuh"

namespace gdn::cuda::chunked {
namespace {

constexpr int kDim = 128;              // K = V
constexpr int kFixupCols = 16;         // V columns per fixup block
constexpr int kFixupThreads = 256;     // 128 rows x 2 halves of 8 columns
constexpr int64_t kHeadElems = int64_t{kDim} * kDim;

template <typename StateT>
__device__ __forceinline__ float Load(const char* page, int64_t at) {
  if constexpr (sizeof(StateT) == 4) {
    return reinterpret_cast<const float*>(page)[at];
  } else {
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(page)[at]);
  }
}

template <typename StateT>
__device__ __forceinline__ void Store(char* page, int64_t at, float x) {
  if constexpr (sizeof(StateT) == 4) {
    reinterpret_cast<float*>(page)[at] = x;
  } else {
    reinterpret_cast<__nv_bfloat16*>(page)[at] = __float2bfloat16_rn(x);
  }
}

__device__ __forceinline__ bool RealPagesUsable(const SpanFixupArgs& a) {
  const int ip = a.initial_pages[0], fp = a.final_pages[0];
  return GDN_PAGE_IN_POOL_OR_ZERO(ip, a.num_pages) && GDN_PAGE_IN_POOL(fp, a.num_pages);
}

template <typename StateT>
__global__ void SpanIdentityKernel(SpanFixupArgs a) {
  char* page = a.scratch + SpanPages{a.spans}.identity() * a.scratch_page_bytes;
  const int64_t n = kHeadElems * a.num_v_heads;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t within = i % kHeadElems;
    Store<StateT>(page, i, within / kDim == within % kDim ? 1.0f : 0.0f);
  }
}

// grid (V / kFixupCols, Hv), kFixupThreads threads: thread t owns row
// d = t / 2 and columns c0 .. c0 + 7 (c0 = 8 (t % 2)) of the block's tile.
template <typename StateT>
__global__ void __launch_bounds__(kFixupThreads) SpanFixupKernel(SpanFixupArgs a) {
  __shared__ float z[kDim][kFixupCols];
  const SpanPages pages{a.spans};
  const int h = blockIdx.y, col0 = blockIdx.x * kFixupCols;
  const int d = threadIdx.x / 2, c0 = (threadIdx.x % 2) * 8;
  const int64_t head = h * kHeadElems;
  const int64_t row_at = head + int64_t{d} * kDim + col0 + c0;  // (d, col0 + c0)
  auto scratch_page = [&a](int id) { return a.scratch + id * a.scratch_page_bytes; };

  // Z_0: the initial page, zero, or NaN when the real page ids are unusable.
  const bool usable = RealPagesUsable(a);
  const int ip = a.initial_pages[0];
  const char* init = usable && ip != kZeroStatePage ? a.pool_base + ip * a.page_bytes : nullptr;
  char* z0 = scratch_page(pages.z(0));
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float x = !usable ? __int_as_float(0x7fc00000)
                            : init != nullptr ? Load<StateT>(init, row_at + i) : 0.0f;
    z[d][c0 + i] = x;
    Store<StateT>(z0, row_at + i, x);
  }
  for (int p = 0; p + 1 < a.spans; ++p) {
    __syncthreads();  // z holds Z_p
    const char* m = scratch_page(pages.m(p));
    const char* n = scratch_page(pages.n(p));
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = Load<StateT>(n, row_at + i);
    const int64_t m_row = head + int64_t{d} * kDim;
#pragma unroll 4
    for (int j = 0; j < kDim; ++j) {
      const float mj = Load<StateT>(m, m_row + j);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] = fmaf(mj, z[j][c0 + i], acc[i]);
    }
    __syncthreads();  // every read of Z_p done
    char* next = scratch_page(pages.z(p + 1));
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      z[d][c0 + i] = acc[i];
      Store<StateT>(next, row_at + i, acc[i]);
    }
  }
}

template <typename StateT>
__global__ void SpanFinalCopyKernel(SpanFixupArgs a) {
  if (!RealPagesUsable(a)) return;
  const int4* src = reinterpret_cast<const int4*>(
      a.scratch + SpanPages{a.spans}.last() * a.scratch_page_bytes);
  int4* dst = reinterpret_cast<int4*>(a.pool_base + a.final_pages[0] * a.page_bytes);
  const int64_t n = kHeadElems * a.num_v_heads * int64_t{sizeof(StateT)} / 16;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = src[i];
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
struct Identity {
  static void Launch(const SpanFixupArgs& a, dim3 g, int t, cudaStream_t s) {
    SpanIdentityKernel<StateT><<<g, t, 0, s>>>(a);
  }
};
template <typename StateT>
struct Fixup {
  static void Launch(const SpanFixupArgs& a, dim3 g, int t, cudaStream_t s) {
    SpanFixupKernel<StateT><<<g, t, 0, s>>>(a);
  }
};
template <typename StateT>
struct FinalCopy {
  static void Launch(const SpanFixupArgs& a, dim3 g, int t, cudaStream_t s) {
    SpanFinalCopyKernel<StateT><<<g, t, 0, s>>>(a);
  }
};

int64_t StateBytes(StateDType dtype) { return dtype == StateDType::kF32 ? 4 : 2; }

bool Valid(const SpanFixupArgs& a) {
  return a.scratch != nullptr && a.spans >= 2 && a.num_v_heads > 0 &&
         a.scratch_page_bytes >= kHeadElems * a.num_v_heads * StateBytes(a.state_dtype) &&
         a.scratch_page_bytes % 16 == 0 && a.page_bytes % 16 == 0 && a.initial_pages != nullptr &&
         a.final_pages != nullptr;
}

}  // namespace

cudaError_t LaunchSpanIdentity(const SpanFixupArgs& a, cudaStream_t stream) {
  if (!Valid(a)) return cudaErrorInvalidValue;
  return Launch<Identity>(a, dim3(a.num_v_heads * 16), 256, stream);
}

cudaError_t LaunchSpanFixup(const SpanFixupArgs& a, cudaStream_t stream) {
  if (!Valid(a)) return cudaErrorInvalidValue;
  return Launch<Fixup>(a, dim3(kDim / kFixupCols, a.num_v_heads), kFixupThreads, stream);
}

cudaError_t LaunchSpanFinalCopy(const SpanFixupArgs& a, cudaStream_t stream) {
  if (!Valid(a)) return cudaErrorInvalidValue;
  return Launch<FinalCopy>(a, dim3(a.num_v_heads * 8), 256, stream);
}

}  // namespace gdn::cuda::chunked
