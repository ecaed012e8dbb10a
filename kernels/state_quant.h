// The element arithmetic of int8 and fp8 (e4m3) state pages, shared by every
// implementation that reads or writes them: the CPU backend, the CUDA
// decode and chunked-prefill kernels, the host page codec and the tests. The
// float64 oracle (kernels/oracle/quantized_round_trip.h) re-derives the same
// decisions in double precision from the same random bits.
//
// Page layout (gdn_types.h StatePageLayout): [Hv, K, V] one-byte codes, V
// fastest, then fp32 scales [Hv, V / kStateScaleCols]; a group is
// kStateScaleCols adjacent columns of one head over all K rows, and its
// element value is Decode(code) * scale.
//
// Storing a group of fp32 values x (the state after a call):
//   amax  = max |x|, taken on the bit patterns (AbsBits) so NaN wins;
//   scale = amax / qmax, inv = qmax / amax (GroupScaleFor); qmax = 127 for
//           int8, 448 (the largest finite e4m3) for fp8. A group with amax
//           below kMinGroupAmax stores zeros with scale 1; a non-finite
//           amax stores NaN as its scale, so a broken state stays visibly
//           broken (an fp32 page would hold the NaN / Inf itself);
//   code  = Encode(x * inv), clamped to +-qmax: round to nearest even, or
//           stochastic: up with probability frac, exactly when
//           frac >= 1 - u for the element's uniform u (ElementBits).
//
// The random bits are a pure function of (salt, element index in the page),
// salt = RoundingSalt of the gates of the last token the stored state has
// seen, at that head: every store of a decode chain draws fresh bits, and a
// rerun of the same inputs stores the same bytes (reproducible tests; the
// oracle draws the same bits).
//
// Header-only: host C++ and CUDA device code (GDN_QUANT_FN).
#ifndef GDN_KERNELS_STATE_QUANT_H_
#define GDN_KERNELS_STATE_QUANT_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GDN_QUANT_FN __host__ __device__ __forceinline__
#else
#define GDN_QUANT_FN inline
#endif

namespace gdn::quant {

inline constexpr float kInt8Max = 127.0f;
inline constexpr float kFp8Max = 448.0f;  // e4m3: 0x7e; 0x7f is NaN (no infinities)
// Groups whose max |x| is below this store zeros (their values are far
// below anything a read can see, and 1 / amax would overflow for tiny ones).
inline constexpr float kMinGroupAmax = 0x1p-100f;
inline constexpr float kZeroGroupScale = 1.0f;

GDN_QUANT_FN uint32_t FloatBits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}

GDN_QUANT_FN float BitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

// |x| as bits: for non-negative floats the integer order is the value
// order, and NaN patterns sort above +inf, so an integer max over AbsBits
// is a max |x| that keeps NaN (and reduces with integer warp shuffles).
GDN_QUANT_FN uint32_t AbsBits(float x) { return FloatBits(x) & 0x7fffffffu; }

// lowbias32 (C. Wellons): a full-avalanche 32-bit mixer.
GDN_QUANT_FN uint32_t Hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// The salt of one store from the last token's gates at that head: (g, beta)
// with direct gating, the raw (a, b) with fused gating.
GDN_QUANT_FN uint32_t RoundingSalt(float gate, float strength) {
  return Hash32(FloatBits(gate) ^ Hash32(FloatBits(strength) + 0x9e3779b9u));
}

// The 32 random bits of element `index` ((h * K + k) * V + v) of a store.
GDN_QUANT_FN uint32_t ElementBits(uint32_t salt, uint32_t index) {
  return Hash32(index ^ salt);
}

// Uniforms in [0, 1) from an element's bits: 24 bits (int8, fp8 subnormals)
// and the 20 bits that fp8's normal range adds below its 3 mantissa bits.
GDN_QUANT_FN float Uniform24(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }
GDN_QUANT_FN uint32_t Random20(uint32_t bits) { return bits >> 12; }

struct GroupScale {
  float scale;  // stored in the page
  float inv;    // multiplies x before encoding (0: the group stores zeros)
};

GDN_QUANT_FN GroupScale GroupScaleFor(uint32_t amax_bits, float qmax) {
  if (amax_bits >= 0x7f800000u) return {BitsFloat(0x7fc00000u), 0.0f};  // Inf / NaN
  const float amax = BitsFloat(amax_bits);
  if (amax < kMinGroupAmax) return {kZeroGroupScale, 0.0f};
  return {amax / qmax, qmax / amax};
}

// ---- int8: codes -127 .. 127 ------------------------------------------------

GDN_QUANT_FN int8_t EncodeInt8(float x, float inv, bool stochastic, uint32_t bits) {
  const float y = fminf(fmaxf(x * inv, -kInt8Max), kInt8Max);  // NaN -> -127
  float q;
  if (stochastic) {
    const float f = floorf(y);
    q = f + ((y - f) >= 1.0f - Uniform24(bits) ? 1.0f : 0.0f);
  } else {
    q = rintf(y);  // ties to even
  }
  return static_cast<int8_t>(static_cast<int>(q));
}

GDN_QUANT_FN float DecodeInt8(int8_t code) { return static_cast<float>(code); }

// ---- fp8 e4m3: sign, 4 exponent bits (bias 7), 3 mantissa bits -------------

GDN_QUANT_FN uint8_t EncodeFp8(float x, float inv, bool stochastic, uint32_t bits) {
  const float y = x * inv;
  const uint32_t sign = (FloatBits(y) >> 24) & 0x80u;
  const float m = fminf(fabsf(y), kFp8Max);  // NaN -> 448
  uint32_t code;
  if (m < 0x1p-6f) {
    // Subnormals (and the smallest normal, code 8): steps of 2^-9.
    const float t = m * 512.0f;  // exact
    float c;
    if (stochastic) {
      const float f = floorf(t);
      c = f + ((t - f) >= 1.0f - Uniform24(bits) ? 1.0f : 0.0f);
    } else {
      c = rintf(t);
    }
    code = static_cast<uint32_t>(c);
  } else {
    // Normals: the top 3 of fp32's 23 mantissa bits are e4m3's; rounding
    // adds to the 20 below and truncates (a carry moves to the next binade,
    // the right neighbour). Rebias 127 -> 7: code = (bits >> 20) - 120 * 8.
    uint32_t b = FloatBits(m);
    b += stochastic ? Random20(bits) : 0x7ffffu + ((b >> 20) & 1u);
    code = (b >> 20) - 960u;
    if (code > 0x7eu) code = 0x7eu;  // never past 448 (m <= 448 already)
  }
  return static_cast<uint8_t>(sign | code);
}

GDN_QUANT_FN float DecodeFp8(uint8_t code) {
  const uint32_t mag = code & 0x7fu;
  const uint32_t e = mag >> 3, f = mag & 7u;
  float v = e != 0 ? BitsFloat(((e + 120u) << 23) | (f << 20)) : static_cast<float>(f) * 0x1p-9f;
  if (mag == 0x7fu) v = BitsFloat(0x7fc00000u);
  return (code & 0x80u) != 0 ? -v : v;
}

}  // namespace gdn::quant

#endif  // GDN_KERNELS_STATE_QUANT_H_
