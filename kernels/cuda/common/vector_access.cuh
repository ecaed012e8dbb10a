// Element conversions and vector loads / stores of global memory (device
// code), for every kernel here: fp32 / bf16 / fp16 elements to and from
// fp32, short vectors of them moved in aligned accesses of at most 16 bytes,
// streamed (evict-first) row vectors, and pair stores.
#ifndef GDN_KERNELS_CUDA_COMMON_VECTOR_ACCESS_CUH_
#define GDN_KERNELS_CUDA_COMMON_VECTOR_ACCESS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace gdn::cuda {

// ---- elements ----------------------------------------------------------------

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);  // round to nearest even, once per store
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) { return __float2half_rn(x); }

// ---- short vectors (N * sizeof(T) <= 16 per access) ---------------------------

// N adjacent elements moved as one aligned vector (N * sizeof(T) <= 16).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  static_assert(sizeof(T) * N <= 16, "at most one 16-byte access");
  T e[N];
};

// N adjacent elements moved in accesses of at most 16 bytes (so only 16-byte
// alignment is ever assumed).
template <typename T, int N>
__device__ __forceinline__ void LoadAsFloats(const T* ptr, float (&out)[N]) {
  constexpr int kPiece = (N * sizeof(T) <= 16) ? N : static_cast<int>(16 / sizeof(T));
#pragma unroll
  for (int base = 0; base < N; base += kPiece) {
    const Vec<T, kPiece> vec = *reinterpret_cast<const Vec<T, kPiece>*>(ptr + base);
#pragma unroll
    for (int i = 0; i < kPiece; ++i) out[base + i] = ToFloat(vec.e[i]);
  }
}

template <typename T, int N>
__device__ __forceinline__ void StoreFromFloats(T* ptr, const float (&in)[N]) {
  constexpr int kPiece = (N * sizeof(T) <= 16) ? N : static_cast<int>(16 / sizeof(T));
#pragma unroll
  for (int base = 0; base < N; base += kPiece) {
    Vec<T, kPiece> vec;
#pragma unroll
    for (int i = 0; i < kPiece; ++i) vec.e[i] = FromFloat<T>(in[base + i]);
    *reinterpret_cast<Vec<T, kPiece>*>(ptr + base) = vec;
  }
}

// Eight consecutive 16-bit elements (16-byte aligned) as fp32, one 16-byte
// load through the read-only path (inputs that no kernel of the call writes).
__device__ __forceinline__ void Load8AsFloats(const __nv_bfloat16* p, float out[8]) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    out[2 * j] = __uint_as_float(w[j] << 16);             // lower half: lower index
    out[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
  }
}
__device__ __forceinline__ void Load8AsFloats(const __half* p, float out[8]) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __half22float2(h[j]);
    out[2 * j] = f.x;
    out[2 * j + 1] = f.y;
  }
}

// Two adjacent elements (even index) stored at once as T (fp32, bf16 or
// fp16; round to nearest; fp16 overflows to inf, as the true value would).
template <typename T>
__device__ __forceinline__ void StorePair(T* p, float x0, float x1);
template <>
__device__ __forceinline__ void StorePair<float>(float* p, float x0, float x1) {
  *reinterpret_cast<float2*>(p) = make_float2(x0, x1);
}
template <>
__device__ __forceinline__ void StorePair<__nv_bfloat16>(__nv_bfloat16* p, float x0, float x1) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x0, x1);
}
template <>
__device__ __forceinline__ void StorePair<__half>(__half* p, float x0, float x1) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x0, x1);
}

// ---- streamed row vectors -----------------------------------------------------

// One row vector (RowBits: uint4, 16 bytes, or uint2, 8) of data read once
// or written once per call (state pages): around L1, evict-first in L2.
template <typename RowBits>
__device__ __forceinline__ RowBits LoadStreaming(const void* ptr) {
  return __ldcs(reinterpret_cast<const RowBits*>(ptr));
}
template <typename RowBits>
__device__ __forceinline__ void StoreStreaming(void* ptr, RowBits value) {
  __stcs(reinterpret_cast<RowBits*>(ptr), value);
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_COMMON_VECTOR_ACCESS_CUH_
