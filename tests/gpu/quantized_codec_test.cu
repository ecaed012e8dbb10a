// The int8 / fp8 device codecs (recurrent_quant.cuh: byte-permute int8
// decode, cvt.rn.f16x2.e4m3x2 fp8 decode; common/state_codes.cuh: magic-add
// int8 encode, cvt.rn.satfinite.e4m3x2.f32 fp8 encode, as the recurrent
// kernel's words and as the chunked prefill's per-code / per-pair stores)
// against the host element arithmetic of kernels/state_quant.h, bit for bit:
//   encode: a strided sweep of the fp32 patterns of the fast path's domain
//     (int8: |y| < 127.5, fp8: |y| <= 896) plus every tie between codes and
//     its neighbours, the subnormal and saturation boundaries and both zeros;
//     then x * inv of random groups as the store computes it (|x| <= amax);
//   decode: all 256 codes (NaN codes must decode to NaN).
// Skips itself without a device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/common/state_codes.cuh"
#include "kernels/cuda/recurrent_quant.cuh"
#include "kernels/state_quant.h"

namespace gdn::cuda {
namespace {

// y[i] = x[i] * inv[i] (as the stores: __fmul_rn), 4 values -> one word:
// the recurrent kernel's EncodeNearestWord, or (per_code) the chunked
// prefill's form: int8 one Int8NearestBits per code, fp8 one
// Fp8PairNearest per pair.
template <typename StateT>
__global__ void EncodeKernel(const float* x, const float* inv, uint32_t* words, int n_words,
                             bool per_code) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_words) return;
  float y[4];
  for (int j = 0; j < 4; ++j) y[j] = __fmul_rn(x[4 * i + j], inv[4 * i + j]);
  if (!per_code) {
    words[i] = EncodeNearestWord<StateT>(y);
  } else if constexpr (std::is_same_v<StateT, QInt8>) {
    uint32_t w = 0;
    for (int j = 0; j < 4; ++j) w |= (Int8NearestBits(y[j]) & 0xffu) << (8 * j);
    words[i] = w;
  } else {
    words[i] = Fp8PairNearest(y[0], y[1]) | static_cast<uint32_t>(Fp8PairNearest(y[2], y[3])) << 16;
  }
}

template <typename StateT>
__global__ void DecodeKernel(const uint32_t* words, float* out, int n_words) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_words) return;
  DecodeCodeWord<StateT>(words[i], out + 4 * i);
}

bool HaveDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

float Bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T>
T* ToDevice(const std::vector<T>& v) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, v.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

// Device codes of x * inv (x padded to whole words), in EncodeKernel's
// per_code form or not.
template <typename StateT>
std::vector<uint8_t> DeviceEncode(std::vector<float> x, std::vector<float> inv, bool per_code) {
  while (x.size() % 4 != 0) {
    x.push_back(0.0f);
    inv.push_back(1.0f);
  }
  const int n_words = static_cast<int>(x.size() / 4);
  float* dx = ToDevice(x);
  float* dinv = ToDevice(inv);
  uint32_t* dw = nullptr;
  EXPECT_EQ(cudaMalloc(&dw, n_words * sizeof(uint32_t)), cudaSuccess);
  EncodeKernel<StateT><<<(n_words + 255) / 256, 256>>>(dx, dinv, dw, n_words, per_code);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<uint8_t> codes(x.size());
  EXPECT_EQ(cudaMemcpy(codes.data(), dw, codes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dx);
  cudaFree(dinv);
  cudaFree(dw);
  return codes;
}

template <typename StateT>
uint8_t HostEncode(float x, float inv) {
  if constexpr (std::is_same_v<StateT, QInt8>) {
    return static_cast<uint8_t>(quant::EncodeInt8(x, inv, false, 0));
  } else {
    return quant::EncodeFp8(x, inv, false, 0);
  }
}

template <typename StateT>
float HostDecode(uint8_t code) {
  if constexpr (std::is_same_v<StateT, QInt8>) {
    return quant::DecodeInt8(static_cast<int8_t>(code));
  } else {
    return quant::DecodeFp8(code);
  }
}

template <typename StateT>
void ExpectSameCodes(const std::vector<float>& x, const std::vector<float>& inv) {
  for (bool per_code : {false, true}) {
    const std::vector<uint8_t> got = DeviceEncode<StateT>(x, inv, per_code);
    int64_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const uint8_t want = HostEncode<StateT>(x[i], inv[i]);
      if (got[i] != want && ++bad <= 10) {
        ADD_FAILURE() << (per_code ? "per code" : "word") << ": x " << x[i] << " (0x" << std::hex
                      << quant::FloatBits(x[i]) << ") inv " << inv[i] << ": device 0x"
                      << int(got[i]) << " host 0x" << int(want);
      }
    }
    EXPECT_EQ(bad, 0) << "of " << x.size() << (per_code ? ", per code" : ", words");
  }
}

// Finite y in [-limit, limit]: every stride-th pattern, the values within
// 4 ulps of each point in `marks`, both signs.
std::vector<float> Sweep(float limit, uint32_t stride, const std::vector<float>& marks) {
  std::vector<float> y;
  const uint32_t top = quant::FloatBits(limit);
  for (uint32_t u = 0; u <= top; u += stride) y.push_back(Bits(u));
  for (float m : marks) {
    const uint32_t b = quant::FloatBits(m);
    for (int d = -4; d <= 4; ++d) {
      const int64_t u = static_cast<int64_t>(b) + d;
      if (u >= 0 && u <= top) y.push_back(Bits(static_cast<uint32_t>(u)));
    }
  }
  const size_t n = y.size();
  for (size_t i = 0; i < n; ++i) y.push_back(-y[i]);
  return y;
}

TEST(QuantizedCodecTest, Int8NearestMatchesHost) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  std::vector<float> marks = {0.0f, 0x1p-149f, 0x1p-126f, 127.0f, 127.5f};
  for (int k = 0; k <= 127; ++k) marks.push_back(k + 0.5f);  // ties
  // The fast path's domain: |y| <= 127 * (1 + 2^-24)^2 < 127.5.
  const std::vector<float> y = Sweep(127.49998f, 97, marks);
  ExpectSameCodes<QInt8>(y, std::vector<float>(y.size(), 1.0f));
}

TEST(QuantizedCodecTest, Fp8NearestMatchesHost) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  std::vector<float> marks = {0.0f, 0x1p-149f, 0x1p-126f, 0x1p-10f, 0x1p-9f, 0x1p-6f,
                              448.0f, 464.0f, 480.0f, 896.0f};
  // Every e4m3 value and every midpoint between neighbours (ties).
  for (int code = 0; code < 0x7e; ++code) {
    const float a = quant::DecodeFp8(static_cast<uint8_t>(code));
    const float b = quant::DecodeFp8(static_cast<uint8_t>(code + 1));
    marks.push_back(a);
    marks.push_back(0.5f * (a + b));
  }
  const std::vector<float> y = Sweep(896.0f, 97, marks);
  ExpectSameCodes<QFp8>(y, std::vector<float>(y.size(), 1.0f));
}

// The store's arithmetic: groups of random magnitude, inv from
// GroupScaleFor, x in [-amax, amax] (amax itself included).
template <typename StateT>
void ExpectGroupsMatch(float qmax) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-99, 60);
  std::vector<float> x, inv;
  for (int group = 0; group < 20000; ++group) {
    const float amax = std::ldexp(1.0f + 0.5f * (unit(rng) + 1.0f), exponent(rng));
    const float group_inv = quant::GroupScaleFor(quant::FloatBits(amax), qmax).inv;
    for (int i = 0; i < 64; ++i) {
      const float v = i == 0 ? amax : i == 1 ? -amax : amax * unit(rng);
      x.push_back(v);
      inv.push_back(group_inv);
    }
  }
  ExpectSameCodes<StateT>(x, inv);
}

TEST(QuantizedCodecTest, StoreArithmeticMatchesHost) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  ExpectGroupsMatch<QInt8>(quant::kInt8Max);
  ExpectGroupsMatch<QFp8>(quant::kFp8Max);
}

template <typename StateT>
void ExpectAllCodesDecode() {
  std::vector<uint32_t> words(64);
  for (int i = 0; i < 64; ++i) {
    words[i] = (4u * i) | (4u * i + 1) << 8 | (4u * i + 2) << 16 | (4u * i + 3) << 24;
  }
  uint32_t* dw = ToDevice(words);
  float* dout = nullptr;
  ASSERT_EQ(cudaMalloc(&dout, 256 * sizeof(float)), cudaSuccess);
  DecodeKernel<StateT><<<1, 64>>>(dw, dout, 64);
  std::vector<float> got(256);
  ASSERT_EQ(cudaMemcpy(got.data(), dout, 256 * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(dw);
  cudaFree(dout);
  for (int code = 0; code < 256; ++code) {
    const float want = HostDecode<StateT>(static_cast<uint8_t>(code));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[code])) << "code " << code;
    } else {
      EXPECT_EQ(quant::FloatBits(got[code]), quant::FloatBits(want))
          << "code " << code << ": " << got[code] << " vs " << want;
    }
  }
}

TEST(QuantizedCodecTest, EveryCodeDecodesAsOnTheHost) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  ExpectAllCodesDecode<QInt8>();
  ExpectAllCodesDecode<QFp8>();
}

}  // namespace
}  // namespace gdn::cuda
