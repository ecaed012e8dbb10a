// A warp-specialised pipeline of the Hopper primitives of kernels/cuda/common
// (tma.cuh, mbarrier.cuh, wgmma.cuh), the structure of the v8 chunked
// prefill (bench/prefill/HOPPER_DESIGN.md §5 step 0):
//   WarpSpecializedPipeline: producer warpgroup (setmaxnreg.dec) issuing
//   TMA loads into a 2-stage ring of full / empty mbarriers, two consumer
//   warpgroups (setmaxnreg.inc) running SS wgmma m64n128k16 on SW128 tiles
//   (A K-major, B MN-major: the v8 state-update operand shapes), 8 stages
//   so every barrier goes through 4 phases.
// The product is checked against float64 with the bound stated at
// CheckProduct (tests/gpu/hopper_test_support.cuh); the test prints its
// worst err / (2^-23 sum|ab|).
//
// Skips itself without an sm_90 device.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/common/mbarrier.cuh"
#include "kernels/cuda/common/tma.cuh"
#include "kernels/cuda/common/wgmma.cuh"
#include "tests/gpu/hopper_test_support.cuh"

namespace gdn::cuda {
namespace {

using hopper_test::Bf16;
using hopper_test::CheckProduct;
using hopper_test::DeviceBuffer;
using hopper_test::F16;
using hopper_test::HopperTest;
using hopper_test::RandomValues;
using hopper_test::WaitOrTrap;

constexpr int kPipeStages = 2;
constexpr uint32_t kPipeABytes = 128 * 128;           // A stage: [128 rows][64 k] bf16
constexpr uint32_t kPipeBBytes = 2 * 64 * 128;        // B stage: 2 x [64 k rows][64 n]
constexpr uint32_t kPipeStageBytes = kPipeABytes + kPipeBBytes;
constexpr uint32_t kPipeSmem = kPipeStages * kPipeStageBytes + 1024;

// D[128, 128] = A[128, 64 k_steps] B[64 k_steps, 128]. WG 0: producer (one
// thread issues the TMA loads), WG 1 / 2: rows 0-63 / 64-127.
template <typename T>
__global__ void __launch_bounds__(384, 1)
    PipelineKernel(const __grid_constant__ CUtensorMap map_a,
                   const __grid_constant__ CUtensorMap map_b, float* d, int k_steps) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = AlignShared<1024>(smem_raw);
  __shared__ uint64_t full[kPipeStages];
  __shared__ uint64_t empty[kPipeStages];
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kPipeStages; ++s) {
      MbarrierInit(&full[s], 1);
      MbarrierInit(&empty[s], 256);  // every consumer thread releases
    }
    FenceMbarrierInit();
  }
  __syncthreads();

  if (wg == 0) {
    SetMaxNRegDecrease<40>();
    if (threadIdx.x == 0) {
      TmaPrefetchDescriptor(&map_a);
      TmaPrefetchDescriptor(&map_b);
      for (int s = 0; s < k_steps; ++s) {
        const int stage = s % kPipeStages;
        const uint32_t use = s / kPipeStages;
        WaitOrTrap(&empty[stage], (use & 1) ^ 1);  // use 0 passes at once
        uint8_t* sa = smem + stage * kPipeStageBytes;
        uint8_t* sb = sa + kPipeABytes;
        MbarrierArriveExpectTx(&full[stage], kPipeStageBytes);
        TmaLoad2D(sa, &map_a, &full[stage], 64 * s, 0);
        TmaLoad2D(sb, &map_b, &full[stage], 0, 64 * s);
        TmaLoad2D(sb + kPipeBBytes / 2, &map_b, &full[stage], 64, 64 * s);
      }
    }
  } else {
    SetMaxNRegIncrease<232>();
    const int c = wg - 1;
    const int t = threadIdx.x % 128;
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    const uint32_t base = SharedAddress32(smem);
    for (int s = 0; s < k_steps; ++s) {
      const int stage = s % kPipeStages;
      const uint32_t use = s / kPipeStages;
      WaitOrTrap(&full[stage], use & 1);
      const uint32_t sa = base + stage * kPipeStageBytes + c * 64 * 128;  // this WG's 64 rows
      const uint32_t sb = base + stage * kPipeStageBytes + kPipeABytes;
      WgmmaFenceOperands(acc);
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        WgmmaSs<T, 128, 1>(acc, AdvanceWgmmaDescriptor(WgmmaDescSw128KMajor(sa), 32 * kk),
                           WgmmaDescSw128MnMajor(sb + 2048 * kk, kPipeBBytes / 2), true);
      }
      WgmmaCommitGroup();
      WgmmaWaitGroup<0>();
      WgmmaFenceOperands(acc);
      MbarrierArrive(&empty[stage]);
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) d[(64 * c + AccRow(t, i)) * 128 + AccCol(t, i)] = acc[i];
  }
}

template <typename Type>
void RunPipeline() {
  SCOPED_TRACE(Type::kName);
  constexpr int kSteps = 8;
  constexpr int kK = 64 * kSteps;
  std::mt19937_64 rng(0x77aa);
  const std::vector<uint16_t> a = RandomValues<Type>(128 * kK, rng, false);  // [128][kK]
  const std::vector<uint16_t> b = RandomValues<Type>(kK * 128, rng, false);  // [kK][128]
  DeviceBuffer d_a(a.size() * 2), d_b(b.size() * 2), d_d(128 * 128 * 4);
  ASSERT_NE(d_d.ptr, nullptr);
  ASSERT_CUDA(cudaMemcpy(d_a.ptr, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d_b.ptr, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(d_d.ptr, 0xFF, 128 * 128 * 4));
  CUtensorMap map_a, map_b;
  ASSERT_CU(EncodeTensorMap2D(&map_a, Type::kMapType, d_a.ptr, 128, kK, kK * 2, 128, 64,
                              TmaSwizzle::k128B));
  ASSERT_CU(EncodeTensorMap2D(&map_b, Type::kMapType, d_b.ptr, kK, 128, 256, 64, 64,
                              TmaSwizzle::k128B));
  auto kernel = PipelineKernel<typename Type::Device>;
  ASSERT_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(kPipeSmem)));
  kernel<<<1, 384, kPipeSmem>>>(map_a, map_b, d_d.as<float>(), kSteps);
  ASSERT_CUDA(cudaGetLastError());
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<float> d(128 * 128);
  ASSERT_CUDA(cudaMemcpy(d.data(), d_d.ptr, d.size() * 4, cudaMemcpyDeviceToHost));
  const double worst = CheckProduct(
      d, 128, 128, kK, [&](int m, int kk) { return Type::ToFloat(a[m * kK + kk]); },
      [&](int kk, int j) { return Type::ToFloat(b[kk * 128 + j]); }, "pipeline");
  std::printf("  pipeline %s D[128,128] K=%d: worst err / (2^-23 sum|ab|) = %.3f (bound %d)\n",
              Type::kName, kK, worst, 2 * kK);
}

TEST_F(HopperTest, WarpSpecializedPipelineBf16) { RunPipeline<Bf16>(); }
TEST_F(HopperTest, WarpSpecializedPipelineFp16) { RunPipeline<F16>(); }

}  // namespace
}  // namespace gdn::cuda
