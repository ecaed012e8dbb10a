// Element conversions of the recurrent kernel family (device code): inputs
// (fp32 / bf16 / fp16) and fp32 / bf16 / fp16 state elements to and from
// fp32, and short vectors of them moved in aligned accesses of at most 16
// bytes.
#ifndef GDN_KERNELS_CUDA_RECURRENT_ELEMENTS_CUH_
#define GDN_KERNELS_CUDA_RECURRENT_ELEMENTS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gdn::cuda {

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

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_RECURRENT_ELEMENTS_CUH_
