// The one runtime-to-template dispatch of the head dims (K, V) for every
// kernel family: K and V are 64 or 128 each (ValidateOptions), compiled as
// four instances. Host code, no CUDA headers.
#ifndef GDN_KERNELS_CUDA_COMMON_HEAD_DIMS_H_
#define GDN_KERNELS_CUDA_COMMON_HEAD_DIMS_H_

#include <type_traits>

namespace gdn::cuda {

// A compile-time head dim, as DispatchHeadDims hands it to its callback.
template <int kDim>
using HeadDim = std::integral_constant<int, kDim>;

// Calls launch(HeadDim<K>{}, HeadDim<V>{}) for (K, V) in {64, 128}^2 and
// returns its result; any other pair returns unsupported() (called only
// then, so an error message costs nothing on the launch path). Callers read
// the sizes as decltype(k)::value (a generic lambda).
template <typename Launch, typename Unsupported>
auto DispatchHeadDims(int K, int V, Launch&& launch, Unsupported&& unsupported)
    -> decltype(launch(HeadDim<64>{}, HeadDim<64>{})) {
  if (K == 64 && V == 64) return launch(HeadDim<64>{}, HeadDim<64>{});
  if (K == 64 && V == 128) return launch(HeadDim<64>{}, HeadDim<128>{});
  if (K == 128 && V == 64) return launch(HeadDim<128>{}, HeadDim<64>{});
  if (K == 128 && V == 128) return launch(HeadDim<128>{}, HeadDim<128>{});
  return unsupported();
}

}  // namespace gdn::cuda

// X(K, V, args...) for every compiled (K, V): the instance lists' side of
// DispatchHeadDims (the same four pairs).
#define GDN_FOR_EACH_HEAD_DIMS(X, ...) \
  X(64, 64, __VA_ARGS__)               \
  X(64, 128, __VA_ARGS__)              \
  X(128, 64, __VA_ARGS__)              \
  X(128, 128, __VA_ARGS__)

#endif  // GDN_KERNELS_CUDA_COMMON_HEAD_DIMS_H_
