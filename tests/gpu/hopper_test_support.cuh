// Helpers shared by the tests of the Hopper primitives of kernels/cuda/common
// (tma_test, wgmma_test, warp_specialised_pipeline_test): CUDA / driver
// error assertions, the fixture that skips without an sm_90 device, device
// memory RAII, host 16-bit arithmetic and random operands, the mbarrier wait
// with a watchdog, and the GEMM check against float64 with its bound.
#ifndef GDN_TESTS_GPU_HOPPER_TEST_SUPPORT_CUH_
#define GDN_TESTS_GPU_HOPPER_TEST_SUPPORT_CUH_

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/common/mbarrier.cuh"

#define ASSERT_CUDA(expr)                                                         \
  do {                                                                            \
    const cudaError_t err_ = (expr);                                              \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_);    \
  } while (0)

#define ASSERT_CU(expr)                                 \
  do {                                                  \
    const CUresult res_ = (expr);                       \
    ASSERT_EQ(res_, CUDA_SUCCESS) << #expr << " = " << static_cast<int>(res_); \
  } while (0)

namespace gdn::cuda::hopper_test {

inline bool HopperAvailable() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return false;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return false;
  return prop.major == 9 && prop.minor == 0;  // the binaries are sm_90a only
}

class HopperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HopperAvailable()) GTEST_SKIP() << "no sm_90 device";
  }
};

// Device memory freed at scope end.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

// MbarrierWait with a watchdog: a phase that never completes (wrong
// transaction bytes, a lost arrival) traps after ~2 s of spinning instead of
// hanging the test binary, so the failure names the kernel.
__device__ inline void WaitOrTrap(uint64_t* bar, uint32_t parity) {
  const long long start = clock64();
  while (!MbarrierTryWait(bar, parity)) {
    if (clock64() - start > (1ll << 32)) {  // ~2.3 s at 1.98 GHz
      printf("mbarrier wait timed out: block %d thread %d parity %u\n", blockIdx.x, threadIdx.x,
             parity);
      __trap();
    }
  }
}

// ---- host 16-bit arithmetic (bit patterns) ---------------------------------------

struct Bf16 {
  using Device = __nv_bfloat16;
  static constexpr const char* kName = "bf16";
  static constexpr CUtensorMapDataType kMapType = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  static constexpr uint16_t kNaN = 0x7FC0;
  static constexpr int kLargeExp = 40;   // |x| up to 2^41: products 2^82, sums fine in fp32
  static constexpr int kTinyExp = -40;
  static float ToFloat(uint16_t bits) {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // Round to nearest even (cvt.rn.bf16x2.f32 on finite values).
  static uint16_t FromFloat(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f)) return kNaN;
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
};

struct F16 {
  using Device = __half;
  static constexpr const char* kName = "fp16";
  static constexpr CUtensorMapDataType kMapType = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  static constexpr uint16_t kNaN = 0x7E00;
  static constexpr int kLargeExp = 12;   // |x| up to 8192 (max 65504): sums of 128 fine
  static constexpr int kTinyExp = -12;   // stays normal (min normal 2^-14) times U[1, 2)
  static float ToFloat(uint16_t bits) {
    __half_raw raw;
    raw.x = bits;
    return __half2float(__half(raw));
  }
  // Round to nearest even with saturation to +-65504 (cvt.rn.satfinite).
  static uint16_t FromFloat(float f) {
    if (!std::isnan(f)) f = std::min(65504.0f, std::max(-65504.0f, f));
    const __half h = __float2half_rn(f);
    return static_cast<__half_raw>(h).x;
  }
};

// Random values rounded to the type. Awkward mode: 25% zeros, 10% large
// (2^kLargeExp x U[1, 2)), 10% tiny (2^kTinyExp x U[1, 2)), the rest
// U[-1, 1], each with a random sign.
template <typename Type>
std::vector<uint16_t> RandomValues(size_t n, std::mt19937_64& rng, bool awkward) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    float x = uniform(rng);
    if (awkward) {
      const float pick = unit(rng);
      const float sign = unit(rng) < 0.5f ? -1.0f : 1.0f;
      if (pick < 0.25f) {
        x = 0.0f;
      } else if (pick < 0.35f) {
        x = sign * std::ldexp(1.0f + unit(rng), Type::kLargeExp);
      } else if (pick < 0.45f) {
        x = sign * std::ldexp(1.0f + unit(rng), Type::kTinyExp);
      }
    }
    out[i] = Type::FromFloat(x);
  }
  return out;
}

// ---- GEMM check against float64 ---------------------------------------------------
//
// Bound (every GEMM): the reference is the float64 sum of the products of
// the same rounded 16-bit inputs (exact: a product of two 16-bit floats is
// exact in fp32 and float64, and a float64 sum of <= 512 of them is exact to
// ~1e-16 relative). The device forms the same products exactly and adds K
// of them in fp32; with any faithful rounding (error <= 1 ulp = 2^-23
// relative per addition, truncation included) the first-order error bound
// is (K - 1) 2^-23 sum_k |a_ik b_kj|. The tests allow
//   |D - ref| <= K 2^-22 sum_k |a_ik b_kj|,
// twice that, for the tensor core's alignment of the summands of one k-group
// to their largest exponent before they are added. A row or column that is
// all zero must give exactly 0. Layout or descriptor errors give errors of
// the order of the sum itself (or NaN from the padding), 1e4x the bound.
// Each case prints its worst err / (2^-23 sum|ab|).

// Compares got[m][n] with sum_k a(m, k) b(k, n) in float64 (the accessors
// return the rounded inputs as float). Returns the worst err / (2^-23 sum|ab|).
template <typename AFn, typename BFn>
double CheckProduct(const std::vector<float>& got, int rows, int n, int k, AFn a, BFn b,
                    const std::string& what) {
  const double unit = std::ldexp(1.0, -23);
  double worst = 0;
  int bad = 0;
  for (int m = 0; m < rows; ++m) {
    for (int j = 0; j < n; ++j) {
      double sum = 0, abs_sum = 0;
      for (int kk = 0; kk < k; ++kk) {
        const double p = static_cast<double>(a(m, kk)) * static_cast<double>(b(kk, j));
        sum += p;
        abs_sum += std::fabs(p);
      }
      const double g = got[m * n + j];
      const double err = std::fabs(g - sum);
      const double bound = k * 2.0 * unit * abs_sum;
      const bool ok = std::isfinite(g) && (abs_sum == 0 ? g == 0 : err <= bound);
      if (abs_sum > 0 && std::isfinite(g)) worst = std::max(worst, err / (unit * abs_sum));
      if (!ok && bad++ < 5) {
        ADD_FAILURE() << what << " D[" << m << "][" << j << "] = " << g << ", want " << sum
                      << " (err " << err << ", bound " << bound << ", sum|ab| " << abs_sum << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements out of bound";
  return worst;
}

}  // namespace gdn::cuda::hopper_test

#endif  // GDN_TESTS_GPU_HOPPER_TEST_SUPPORT_CUH_
