// Host entry point of TPrep (tprep.cuh): the v8 chunked prefill's per-chunk
// factors T'' (hi + lo), P, G, exp(G), exp(G_last - G), exp(G_last), rq, rk
// into a TPrepWorkspace (tprep_args.h). No CUDA device code here.
#ifndef GDN_KERNELS_CUDA_CHUNKED_TPREP_H_
#define GDN_KERNELS_CUDA_CHUNKED_TPREP_H_

#include <cuda_runtime_api.h>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/tprep_args.h"

namespace gdn::cuda::chunked {

// Grid (args.num_chunks, args.num_qk_heads). head_dim_k 64 or 128,
// args.io_dtype bf16 or fp16 (else cudaErrorInvalidValue); args.chunk_table
// must be filled (ChunkTableKernel, chunk_table.cuh) before this kernel runs
// on `stream`. Returns the launch error. Three blocks per SM (80
// registers; tprep.cuh says why not four).
cudaError_t LaunchTPrep(const ChunkArgs& args, const TPrepWorkspace& ws, int head_dim_k,
                        cudaStream_t stream);

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_TPREP_H_
