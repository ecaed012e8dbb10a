// The fused gating of the Qwen3-Next layer, per value head h (shared/GDN.md):
//   g    = -exp(A_log[h]) * softplus(a + dt_bias[h])   (log-space decay, <= 0)
//   beta = sigmoid(b)
// softplus(x) = x for x > 20 (the usual threshold). fp32, host and device.
#ifndef GDN_KERNELS_GATING_H_
#define GDN_KERNELS_GATING_H_

#include <cmath>

#if defined(__CUDACC__)
#define GDN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GDN_HOST_DEVICE inline
#endif

namespace gdn {

inline constexpr float kSoftplusThreshold = 20.0f;

GDN_HOST_DEVICE float Softplus(float x) {
  return x > kSoftplusThreshold ? x : log1pf(expf(x));
}

GDN_HOST_DEVICE float FusedDecay(float a, float A_log, float dt_bias) {
  return -expf(A_log) * Softplus(a + dt_bias);
}

GDN_HOST_DEVICE float FusedBeta(float b) { return 1.0f / (1.0f + expf(-b)); }

}  // namespace gdn

#endif  // GDN_KERNELS_GATING_H_
