// Template instances and launch of kernel 2, the state pass:
//   variant 1  state_pass.cuh (cp.async, scalar fragment loads): K, V in
//              {64, 128} x input dtype x state dtype x V tile in {16, 32, 64};
//   variant 2  state_pass_bulk.cuh, bulk copies, one block per V tile;
//   variant 3  the same with the shared tiles multicast over the cluster of a
//              head's V tiles (variant 2 where those clusters would not all be
//              resident at once);
//   variant 4  as 3 with 16 columns per warp (twice the warps per block).
// The bulk kernels take the dtypes at run time (only o's and the pages'
// stores depend on them), so they have K x V x V tile instances only.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/chunked/launch.h"
#include "kernels/cuda/chunked/state_pass.cuh"
#include "kernels/cuda/chunked/state_pass_bulk.cuh"

namespace gdn::cuda::chunked {
namespace {

int64_t StateBlocks(const ChunkArgs& args, int V, int VT) {
  return static_cast<int64_t>(args.num_seqs) * args.num_v_heads * (V / VT);
}

// ---- variant 1 ----------------------------------------------------------------

template <int K, int V, int VT, typename In, typename StateT>
cudaError_t LaunchV1(const ChunkArgs& args, cudaStream_t stream) {
  constexpr int kBytes = StateSmem<K, VT>::kBytes;
  static const cudaError_t attr =
      cudaFuncSetAttribute(StatePassKernel<K, V, VT, In, StateT>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) return attr;
  StatePassKernel<K, V, VT, In, StateT>
      <<<static_cast<unsigned>(StateBlocks(args, V, VT)), kStateThreadsFor<VT>, kBytes,
         stream>>>(args);
  return cudaGetLastError();
}

template <int K, int V, int VT, typename In>
cudaError_t V1ByState(const ChunkArgs& args, cudaStream_t stream) {
  switch (args.state_dtype) {
    case StateDType::kF32:
      return LaunchV1<K, V, VT, In, float>(args, stream);
    case StateDType::kBF16:
      return LaunchV1<K, V, VT, In, __nv_bfloat16>(args, stream);
  }
  return cudaErrorInvalidValue;
}

template <int K, int V, int VT>
cudaError_t V1ByDType(const ChunkArgs& args, cudaStream_t stream) {
  switch (args.io_dtype) {
    case DType::kF32:
      return V1ByState<K, V, VT, float>(args, stream);
    case DType::kBF16:
      return V1ByState<K, V, VT, __nv_bfloat16>(args, stream);
    case DType::kF16:
      return V1ByState<K, V, VT, __half>(args, stream);
  }
  return cudaErrorInvalidValue;
}

// ---- variants 2 - 4 -------------------------------------------------------------

template <int K, int V, int VT, int WC, bool kMulticast>
cudaLaunchConfig_t BulkConfig(const ChunkArgs& args, cudaStream_t stream,
                              cudaLaunchAttribute* cluster) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(StateBlocks(args, V, VT)));
  config.blockDim = dim3(kBulkStateThreads<VT, WC>);
  config.dynamicSmemBytes = BulkStateSmem<K, VT>::kBytes;
  config.stream = stream;
  if (kMulticast) {
    cluster->id = cudaLaunchAttributeClusterDimension;
    cluster->val.clusterDim.x = V / VT;
    cluster->val.clusterDim.y = 1;
    cluster->val.clusterDim.z = 1;
    config.attrs = cluster;
    config.numAttrs = 1;
  }
  return config;
}

template <int K, int V, int VT, int WC, bool kMulticast>
cudaError_t PrepareBulk() {
  static const cudaError_t attr =
      cudaFuncSetAttribute(StatePassBulkKernel<K, V, VT, WC, kMulticast>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           BulkStateSmem<K, VT>::kBytes);
  return attr;
}

template <int K, int V, int VT, int WC, bool kMulticast>
cudaError_t LaunchBulk(const ChunkArgs& args, cudaStream_t stream) {
  if (cudaError_t e = PrepareBulk<K, V, VT, WC, kMulticast>(); e != cudaSuccess) return e;
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t config = BulkConfig<K, V, VT, WC, kMulticast>(args, stream, &cluster);
  return cudaLaunchKernelEx(&config, StatePassBulkKernel<K, V, VT, WC, kMulticast>, args);
}

// Whether clusters of V / VT blocks (one SM each) leave as many blocks
// resident as the plain grid would: the SMs of a GPC need not divide evenly.
template <int K, int V, int VT, int WC>
bool ClustersResident(const ChunkArgs& args, cudaStream_t stream) {
  static const int max_blocks = [&] {
    if (PrepareBulk<K, V, VT, WC, true>() != cudaSuccess) return 0;
    cudaLaunchAttribute cluster;
    cudaLaunchConfig_t config = BulkConfig<K, V, VT, WC, true>(args, stream, &cluster);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, StatePassBulkKernel<K, V, VT, WC, true>,
                                       &config) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return clusters * (V / VT);
  }();
  int device = 0, sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess) {
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  return max_blocks >= std::min<int64_t>(StateBlocks(args, V, VT), sms);
}

template <int K, int V, int VT, int WC>
cudaError_t LaunchMulticastOrNot(const ChunkArgs& args, cudaStream_t stream) {
  if constexpr (V / VT > 1) {
    if (ClustersResident<K, V, VT, WC>(args, stream)) {
      return LaunchBulk<K, V, VT, WC, true>(args, stream);
    }
  }
  return LaunchBulk<K, V, VT, WC, false>(args, stream);
}

template <int K, int V, int VT>
cudaError_t ByVariant(const ChunkArgs& args, int variant, cudaStream_t stream) {
  constexpr int kWideWC = VT < 32 ? VT : 32;
  switch (variant) {
    case 1:
      return V1ByDType<K, V, VT>(args, stream);
    case 2:
      return LaunchBulk<K, V, VT, kWideWC, false>(args, stream);
    case 3:
      return LaunchMulticastOrNot<K, V, VT, kWideWC>(args, stream);
    case 4:
      return LaunchMulticastOrNot<K, V, VT, 16>(args, stream);
  }
  return cudaErrorInvalidValue;
}

template <int K, int V>
cudaError_t ByTile(const ChunkArgs& args, int v_tile, int variant, cudaStream_t stream) {
  if (v_tile == 16) return ByVariant<K, V, 16>(args, variant, stream);
  if (v_tile == 32) return ByVariant<K, V, 32>(args, variant, stream);
  if (v_tile == 64) return ByVariant<K, V, 64>(args, variant, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchStatePass(const GdnOptions& options, const ChunkArgs& args,
                            int v_tile, int variant, cudaStream_t stream) {
  const int K = options.shape.head_dim_k, V = options.shape.head_dim_v;
  if (K == 64 && V == 64) return ByTile<64, 64>(args, v_tile, variant, stream);
  if (K == 64 && V == 128) return ByTile<64, 128>(args, v_tile, variant, stream);
  if (K == 128 && V == 64) return ByTile<128, 64>(args, v_tile, variant, stream);
  if (K == 128 && V == 128) return ByTile<128, 128>(args, v_tile, variant, stream);
  return cudaErrorInvalidValue;
}

}  // namespace gdn::cuda::chunked
