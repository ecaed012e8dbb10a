// The compiled instances of the recurrent kernel family: the list of
// (K, V, V tile, threads) per state dtype, shared by the dispatch
// (recurrent_dispatch.cu, which sees only the declaration below) and the
// instance files
// (recurrent_instances_<input dtype>.cu, one per input dtype so that the
// slow device compiles run in parallel).
#ifndef GDN_KERNELS_CUDA_RECURRENT_INSTANCES_H_
#define GDN_KERNELS_CUDA_RECURRENT_INSTANCES_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "kernels/cuda/recurrent_params.h"

namespace gdn::cuda {

// One-byte state elements: the code of an int8 / fp8 (e4m3) page
// (recurrent_quant.cuh reads and writes them with their scales).
struct QInt8 {
  int8_t code;
};
struct QFp8 {
  uint8_t code;
};

// Launches the instance for these compile-time sizes; a combination the
// kernel cannot tile (V tile wider than V) is InvalidArgument.
// kStages selects the kernel: 0 the one-block-per-item kernel
// (recurrent_kernel.cuh), 2 the persistent kernel with two cp.async buffers
// (recurrent_persistent_kernel.cuh), 3 the persistent kernel with a
// three-stage ring (recurrent_deep_kernel.cuh).
// kMinBlocks is the resident-blocks hint of __launch_bounds__ (a register
// cap: 65536 / (kThreads * kMinBlocks) per thread).
template <int kK, int kV, int kVTile, int kThreads, int kMinBlocks, int kStages,
          typename InT, typename StateT>
absl::Status LaunchRecurrentShape(const RecurrentParams& params, cudaStream_t stream);

// The block shapes of RecurrentVariant, as (V tile, threads) per state dtype.
template <typename StateT>
struct RecurrentVariantShapes;
template <>
struct RecurrentVariantShapes<float> {
  static constexpr int kSmallTile = 16, kSmallThreads = 64;
  static constexpr int kLargeTile = 32, kLargeThreads = 128;
  static constexpr int kWideTile = 64, kWideThreads = 256;
  static constexpr int kPersistentTile = 32, kPersistentThreads = 128;
  static constexpr int kDeepTile = 32, kDeepThreads = 128, kDeepMinBlocks = 1;
  // 4 resident blocks of the wide shape (64 registers) instead of the 3 that
  // the compiler's 80 registers allow.
  static constexpr int kSmallMinBlocks = 1, kLargeMinBlocks = 1, kWideMinBlocks = 4,
                       kPersistentMinBlocks = 1;
};
template <>
struct RecurrentVariantShapes<__nv_bfloat16> {
  static constexpr int kSmallTile = 32, kSmallThreads = 128;
  static constexpr int kLargeTile = 64, kLargeThreads = 128;
  static constexpr int kWideTile = 128, kWideThreads = 256;
  static constexpr int kPersistentTile = 64, kPersistentThreads = 128;
  static constexpr int kDeepTile = 64, kDeepThreads = 128, kDeepMinBlocks = 1;
  static constexpr int kSmallMinBlocks = 1, kLargeMinBlocks = 1, kWideMinBlocks = 1,
                       kPersistentMinBlocks = 1;
};

// int8 / fp8: 8 columns per thread (recurrent_quant.cuh). Only kSmall
// (latency-bound grids) and the two persistent kernels are compiled
// (recurrent_dispatch.cu refuses the others): large grids are what the
// compressed pages are for. The persistent shapes ask for 5 resident blocks
// (<= 96 registers, 20 warps per SM; the H200 profile at 4 blocks was
// latency-bound with ~1 eligible warp per scheduler; shared memory allows 6).
// At K = V = 128 ptxas spills a dozen words of per-item scalars (outside
// the token and store loops) to buy the fifth block.
struct QuantVariantShapes {
  static constexpr int kSmallTile = 32, kSmallThreads = 128, kSmallMinBlocks = 1;
  static constexpr int kPersistentTile = 64, kPersistentThreads = 128, kPersistentMinBlocks = 5;
  static constexpr int kDeepTile = 64, kDeepThreads = 128, kDeepMinBlocks = 5;
};
template <>
struct RecurrentVariantShapes<QInt8> : QuantVariantShapes {};
template <>
struct RecurrentVariantShapes<QFp8> : QuantVariantShapes {};

}  // namespace gdn::cuda

// X(K, V, VTile, Threads, InT, StateT) for every instance of one input dtype.
#define GDN_RECURRENT_KV(X, InT, StateT, VT, NT, MB, P) \
  X(64, 64, VT, NT, MB, P, InT, StateT)                 \
  X(64, 128, VT, NT, MB, P, InT, StateT)                \
  X(128, 64, VT, NT, MB, P, InT, StateT)                \
  X(128, 128, VT, NT, MB, P, InT, StateT)
#define GDN_RECURRENT_STATE(X, InT, StateT)                                      \
  GDN_RECURRENT_KV(X, InT, StateT,                                               \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kSmallTile,      \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kSmallThreads,       \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kSmallMinBlocks, 0) \
  GDN_RECURRENT_KV(X, InT, StateT,                                               \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kLargeTile,      \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kLargeThreads,       \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kLargeMinBlocks, 0) \
  GDN_RECURRENT_KV(X, InT, StateT,                                               \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kWideTile,       \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kWideThreads,       \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kWideMinBlocks, 0)  \
  GDN_RECURRENT_KV(X, InT, StateT,                                               \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kPersistentTile, \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kPersistentThreads,       \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kPersistentMinBlocks, 2) \
  GDN_RECURRENT_KV(X, InT, StateT,                                               \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kDeepTile,       \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kDeepThreads,       \
                   ::gdn::cuda::RecurrentVariantShapes<StateT>::kDeepMinBlocks, 3)
#define GDN_RECURRENT_INSTANCES_FOR_INPUT(X, InT) \
  GDN_RECURRENT_STATE(X, InT, float)              \
  GDN_RECURRENT_STATE(X, InT, __nv_bfloat16)

// The int8 / fp8 instances of one input dtype (bf16 and fp32 inputs only:
// recurrent_instances_q8_<input>.cu).
#define GDN_RECURRENT_QUANT_STATE(X, InT, StateT)                                   \
  GDN_RECURRENT_KV(X, InT, StateT, ::gdn::cuda::QuantVariantShapes::kSmallTile,     \
                   ::gdn::cuda::QuantVariantShapes::kSmallThreads,                  \
                   ::gdn::cuda::QuantVariantShapes::kSmallMinBlocks, 0)             \
  GDN_RECURRENT_KV(X, InT, StateT, ::gdn::cuda::QuantVariantShapes::kPersistentTile, \
                   ::gdn::cuda::QuantVariantShapes::kPersistentThreads,             \
                   ::gdn::cuda::QuantVariantShapes::kPersistentMinBlocks, 2)        \
  GDN_RECURRENT_KV(X, InT, StateT, ::gdn::cuda::QuantVariantShapes::kDeepTile,      \
                   ::gdn::cuda::QuantVariantShapes::kDeepThreads,                   \
                   ::gdn::cuda::QuantVariantShapes::kDeepMinBlocks, 3)
#define GDN_RECURRENT_QUANT_INSTANCES_FOR_INPUT(X, InT) \
  GDN_RECURRENT_QUANT_STATE(X, InT, ::gdn::cuda::QInt8) \
  GDN_RECURRENT_QUANT_STATE(X, InT, ::gdn::cuda::QFp8)

// Used inside namespace gdn::cuda.
#define GDN_RECURRENT_INSTANTIATE(K, V, VT, NT, MB, P, InT, StateT)              \
  template absl::Status LaunchRecurrentShape<K, V, VT, NT, MB, P, InT, StateT>(  \
      const RecurrentParams&, cudaStream_t);

#endif  // GDN_KERNELS_CUDA_RECURRENT_INSTANCES_H_
