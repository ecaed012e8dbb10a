// Kernel launch with or without programmatic dependent launch (PDL), shared
// by the recurrent family and the chunked prefill's output pass. Host code;
// include from .cu / .cuh files only (cudaLaunchKernelEx is a template of the
// CUDA runtime header).
#ifndef GDN_KERNELS_CUDA_LAUNCH_PDL_H_
#define GDN_KERNELS_CUDA_LAUNCH_PDL_H_

#include <cuda_runtime.h>

#include <utility>

namespace gdn::cuda {

// Launches `kernel` on `stream`, with programmatic stream serialization when
// `pdl` (cudaLaunchKernelEx; capturable into a graph either way): the kernel
// may start once every block of the previous kernel on the stream has run
// griddepcontrol.launch_dependents (or exited), so whatever it reads of that
// kernel's output it must order itself (griddepcontrol.wait, or flags).
template <typename... KernelArgs, typename... Args>
cudaError_t LaunchMaybePdl(void (*kernel)(KernelArgs...), unsigned grid, unsigned block,
                           size_t dynamic_smem, cudaStream_t stream, bool pdl,
                           Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = dynamic_smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_LAUNCH_PDL_H_
