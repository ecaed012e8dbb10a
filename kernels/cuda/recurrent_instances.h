// The compiled instances of the recurrent kernel family: the block shapes
// per state dtype and the list of (K, V, shape) instances, shared by the
// dispatch (recurrent_dispatch.cu, which sees only the declaration below)
// and the instance files (recurrent_instances_<input dtype>.cu, one per
// input dtype so that the slow device compiles run in parallel).
#ifndef GDN_KERNELS_CUDA_RECURRENT_INSTANCES_H_
#define GDN_KERNELS_CUDA_RECURRENT_INSTANCES_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "kernels/cuda/common/head_dims.h"
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

// Launches the instance for these compile-time sizes (recurrent_launch.cuh);
// a combination the kernel cannot tile (V tile wider than V) is
// InvalidArgument. kPersistent selects the kernel: false the
// one-block-per-item kernel (recurrent_kernel.cuh), true the persistent
// kernel with two cp.async tile buffers (recurrent_persistent_kernel.cuh).
// kMinBlocks is the resident-blocks hint of __launch_bounds__ (a register
// cap: 65536 / (kThreads * kMinBlocks) per thread).
template <int kK, int kV, int kVTile, int kThreads, int kMinBlocks, bool kPersistent,
          typename InT, typename StateT>
absl::Status LaunchRecurrentShape(const RecurrentParams& params, cudaStream_t stream);

// The block shapes of RecurrentVariant, as (V tile, threads, resident-block
// hint) per state dtype. Only what ResolveRecurrentVariant picks for that
// state dtype is compiled (kHasWide: the wide shape, fp32 pages only); the
// dispatch refuses the rest with InvalidArgument.
template <typename StateT>
struct RecurrentVariantShapes;
template <>
struct RecurrentVariantShapes<float> {
  static constexpr bool kHasWide = true;
  static constexpr int kSmallTile = 16, kSmallThreads = 64, kSmallMinBlocks = 1;
  // 4 resident blocks of the wide shape (64 registers) instead of the 3 that
  // the compiler's 80 registers allow.
  static constexpr int kWideTile = 64, kWideThreads = 256, kWideMinBlocks = 4;
  static constexpr int kPersistentTile = 32, kPersistentThreads = 128, kPersistentMinBlocks = 1;
};
template <>
struct RecurrentVariantShapes<__nv_bfloat16> {
  static constexpr bool kHasWide = false;
  static constexpr int kSmallTile = 32, kSmallThreads = 128, kSmallMinBlocks = 1;
  static constexpr int kPersistentTile = 64, kPersistentThreads = 128, kPersistentMinBlocks = 1;
};

// int8 / fp8: 8 columns per thread (recurrent_quant.cuh). The persistent
// shape asks for 5 resident blocks (<= 96 registers, 20 warps per SM; the
// H200 profile at 4 blocks was latency-bound with ~1 eligible warp per
// scheduler; shared memory allows 6), without spills since the store has
// one call site in the token loop (recurrent_tokens.cuh RunItemTokens).
struct QuantVariantShapes {
  static constexpr bool kHasWide = false;
  static constexpr int kSmallTile = 32, kSmallThreads = 128, kSmallMinBlocks = 1;
  static constexpr int kPersistentTile = 64, kPersistentThreads = 128, kPersistentMinBlocks = 5;
};
template <>
struct RecurrentVariantShapes<QInt8> : QuantVariantShapes {};
template <>
struct RecurrentVariantShapes<QFp8> : QuantVariantShapes {};

}  // namespace gdn::cuda

// X(K, V, VTile, Threads, MinBlocks, Persistent, InT, StateT) for one shape
// (Small, Wide or Persistent) of one (input, state) dtype pair, every (K, V).
#define GDN_RECURRENT_SHAPE(X, InT, StateT, Kind, kPersistent)                            \
  GDN_FOR_EACH_HEAD_DIMS(X, ::gdn::cuda::RecurrentVariantShapes<StateT>::k##Kind##Tile,    \
                         ::gdn::cuda::RecurrentVariantShapes<StateT>::k##Kind##Threads,    \
                         ::gdn::cuda::RecurrentVariantShapes<StateT>::k##Kind##MinBlocks,  \
                         kPersistent, InT, StateT)
// fp32 and bf16 pages of one input dtype (recurrent_instances_<input>.cu).
#define GDN_RECURRENT_INSTANCES_FOR_INPUT(X, InT)                 \
  GDN_RECURRENT_SHAPE(X, InT, float, Small, false)                \
  GDN_RECURRENT_SHAPE(X, InT, float, Wide, false)                 \
  GDN_RECURRENT_SHAPE(X, InT, float, Persistent, true)            \
  GDN_RECURRENT_SHAPE(X, InT, __nv_bfloat16, Small, false)        \
  GDN_RECURRENT_SHAPE(X, InT, __nv_bfloat16, Persistent, true)
// int8 / fp8 pages of one input dtype (bf16 and fp32 inputs only:
// recurrent_instances_q8_<input>.cu).
#define GDN_RECURRENT_QUANT_INSTANCES_FOR_INPUT(X, InT)            \
  GDN_RECURRENT_SHAPE(X, InT, ::gdn::cuda::QInt8, Small, false)     \
  GDN_RECURRENT_SHAPE(X, InT, ::gdn::cuda::QInt8, Persistent, true) \
  GDN_RECURRENT_SHAPE(X, InT, ::gdn::cuda::QFp8, Small, false)      \
  GDN_RECURRENT_SHAPE(X, InT, ::gdn::cuda::QFp8, Persistent, true)

// Used inside namespace gdn::cuda.
#define GDN_RECURRENT_INSTANTIATE(K, V, VT, NT, MB, P, InT, StateT)              \
  template absl::Status LaunchRecurrentShape<K, V, VT, NT, MB, P, InT, StateT>(  \
      const RecurrentParams&, cudaStream_t);

#endif  // GDN_KERNELS_CUDA_RECURRENT_INSTANCES_H_
