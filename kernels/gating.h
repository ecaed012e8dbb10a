// The fused gating of the Qwen3-Next layer, per value head h (shared/GDN.md):
//   g    = -exp(A_log[h]) * softplus(a + dt_bias[h])   (log-space decay, <= 0)
//   beta = sigmoid(b)
// softplus(x) = x for x > 20 (the usual threshold); x is the fp32 sum
// a + dt_bias. fp32, host and device (the request reader folds fused gating
// on the host; the cpu and cuda kernels call these for kFused).
//
// Every finite input gives a finite g in [kMinFusedDecay, 0], within a few
// ulp of the exact value: the plain fp32 product overflows (exp(A_log) =
// inf for A_log > 88.7) and underflows (softplus(x) = 0 for x < -104), and
// inf * 0 was a NaN (issue 21, A_log = 100, a = -200). Where both factors
// and the product are normal fp32 numbers the plain product is used (the
// common case, and the cheap one); anywhere else FusedDecaySlow scales the
// factors by powers of two so that neither overflows nor loses precision
// as a denormal. Float and int arithmetic only: the CUDA kernels inline
// this, and a float64 path would add registers to every kernel instance.
#ifndef GDN_KERNELS_GATING_H_
#define GDN_KERNELS_GATING_H_

#include <cfloat>
#include <cmath>

#if defined(__CUDACC__)
#define GDN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GDN_HOST_DEVICE inline
#endif

namespace gdn {

inline constexpr float kSoftplusThreshold = 20.0f;
// The most negative g FusedDecay returns. exp(g) is 0 in fp32 for any
// g < -104, so the floor changes no decay; it is not -FLT_MAX because the
// chunked prefill sums g over a 64-token chunk and subtracts two such sums
// (kernels/cuda/chunked/chunk_prep_blocked.cuh): 64 * 2^120 = 2^126 keeps both
// finite, where -FLT_MAX twice is -inf and -inf - -inf a NaN.
inline constexpr float kMinFusedDecay = -0x1p120f;

GDN_HOST_DEVICE float Softplus(float x) {
  return x > kSoftplusThreshold ? x : log1pf(expf(x));
}

// exp(hi + lo) as m * 2^n, m = exp(r) with |r| <= ln2 / 2 (+ |lo|), where
// hi + lo is a value kept as an unevaluated float pair (|lo| <= ulp(hi)).
// ln2 in two parts (Cody and Waite): n * kLn2Hi is exact for |n| < 2^9, so r
// carries no rounding that exp would amplify. Arguments beyond +-200 are
// clamped: FusedDecaySlow's other factor lies within e^(+-89), so the
// product is 0 or beyond the floor either way, and n stays a small int.
struct ScaledExp {
  float m;
  int n;
};

GDN_HOST_DEVICE ScaledExp ExpSplit(float hi, float lo) {
  constexpr float kLimit = 200.0f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;     // 15 significant bits
  constexpr float kLn2Lo = 1.42860682028622680e-6f;  // ln2 - kLn2Hi
  if (!(hi <= kLimit)) {  // also +inf
    hi = kLimit;
    lo = 0.0f;
  } else if (!(hi >= -kLimit)) {
    hi = -kLimit;
    lo = 0.0f;
  }
  const float n = rintf(hi * kLog2e);
  const float r = ((hi - n * kLn2Hi) - n * kLn2Lo) + lo;
  return {expf(r), static_cast<int>(n)};
}

// FusedDecay for inputs where the plain product is not a normal number.
GDN_HOST_DEVICE float FusedDecaySlow(float x, float A_log) {
  if (x != x || A_log != A_log) return x + A_log;  // NaN in, NaN out (callers check inputs)
  float magnitude;
  if (x < -kSoftplusThreshold) {
    // softplus(x) = e^x (1 - e^x / 2 + ...) = e^x within 1e-9 here, so the
    // magnitude is e^(A_log + x); the sum is kept exact as a pair (Knuth's
    // two-sum), since A_log and x may be far larger than their sum.
    const float s = A_log + x;
    const float x_part = s - A_log;
    const float err = (A_log - (s - x_part)) + (x - x_part);
    const ScaledExp e = ExpSplit(s, err);
    magnitude = ldexpf(e.m, e.n);
  } else {
    // softplus(x) in [2e-9, FLT_MAX]: its mantissa and exponent apart, so
    // the product of mantissas cannot overflow; ldexpf rounds once, also
    // into the denormals.
    int sp_exponent = 0;
    const float sp_mantissa = frexpf(Softplus(x), &sp_exponent);
    const ScaledExp e = ExpSplit(A_log, 0.0f);
    magnitude = ldexpf(e.m * sp_mantissa, e.n + sp_exponent);
  }
  return magnitude >= -kMinFusedDecay ? kMinFusedDecay : -magnitude;
}

GDN_HOST_DEVICE float FusedDecay(float a, float A_log, float dt_bias) {
  const float x = a + dt_bias;
  const float decay_rate = expf(A_log);
  const float softplus = Softplus(x);
  const float magnitude = decay_rate * softplus;
  // Comparisons written so that inf and NaN fail them: the plain product
  // only from normal, finite factors into a normal product below the floor.
  if (decay_rate >= FLT_MIN && decay_rate <= FLT_MAX && softplus >= FLT_MIN &&
      magnitude >= FLT_MIN && magnitude <= -kMinFusedDecay) {
    return -magnitude;
  }
  return FusedDecaySlow(x, A_log);
}

GDN_HOST_DEVICE float FusedBeta(float b) { return 1.0f / (1.0f + expf(-b)); }

}  // namespace gdn

#endif  // GDN_KERNELS_GATING_H_
