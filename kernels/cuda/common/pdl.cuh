// Programmatic dependent launch (PDL, sm_90): the device side (let the next
// kernel start, wait for the previous one) and the host launch with or
// without the attribute. Shared by the recurrent family and the chunked
// prefill's split state pass (chain, then the output pass beside it).
// Include from .cu / .cuh files only (cudaLaunchKernelEx is a template of the
// CUDA runtime header).
#ifndef GDN_KERNELS_CUDA_COMMON_PDL_CUH_
#define GDN_KERNELS_CUDA_COMMON_PDL_CUH_

#include <cuda_runtime.h>

#include <utility>

namespace gdn::cuda {

// ---- device ------------------------------------------------------------------

// Lets the next kernel on the stream (if it was launched with programmatic
// stream serialization) start its prologue now; its own GridDependencyWait
// still waits for this whole grid to finish and flush.
__device__ __forceinline__ void TriggerDependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the previous kernel on the stream has completed and its memory
// is visible. A no-op when this kernel was launched without the attribute.
__device__ __forceinline__ void GridDependencyWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// ---- host --------------------------------------------------------------------

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

#endif  // GDN_KERNELS_CUDA_COMMON_PDL_CUH_
