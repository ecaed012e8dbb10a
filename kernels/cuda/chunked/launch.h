// Host entry points of the chunked-prefill kernels (prep, state pass,
// output pass), one .cu file each (their template instances compile in
// parallel). Internal to kernels/cuda/chunked_prefill*.cu; no CUDA device
// code here.
#ifndef GDN_KERNELS_CUDA_CHUNKED_LAUNCH_H_
#define GDN_KERNELS_CUDA_CHUNKED_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked_prefill.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda::chunked {

// Grid (num_chunks, Hqk); bf16 or fp16 inputs (else cudaErrorInvalidValue).
// Returns the launch error (cudaGetLastError).
cudaError_t LaunchChunkPrep(const GdnOptions& options, const ChunkArgs& args,
                            cudaStream_t stream);

// Grid N * Hv * (V / v_tile); v_tile is 16, 32 or 64; form kSplit (the
// chain, then LaunchOutputPass) or kFused (resolved: not kAuto), as in
// chunked_prefill_state.cu.
cudaError_t LaunchStatePass(const GdnOptions& options, const ChunkArgs& args,
                            int v_tile, ChunkedStatePass form, cudaStream_t stream);

// Kernel 3 (split form): o of every chunk from args.hs / args.un, grid
// num_chunks * Hv (chunked_prefill_output.cu); `pdl` launches it right behind
// the chain (programmatic dependent launch), its blocks waiting on
// args.progress (which must then be set).
cudaError_t LaunchOutputPass(const GdnOptions& options, const ChunkArgs& args,
                             cudaStream_t stream, bool pdl);

// The current device's SM count (132 if it cannot be read).
int MultiprocessorCount();

// Global chunks of a call (kChunk tokens each, the last of a sequence
// partial), from params.cu_seqlens_host.
int64_t CountChunks(const GdnParams& params);

// Bytes of the chunk table (N + 1 + num_chunks int32), rounded up to 256.
size_t ChunkTableBytes(int num_seqs, int64_t num_chunks);

// The call's tensors, pages, shape and flags as ChunkArgs (both
// generations); the workspace tiles stay null (the caller points them).
ChunkArgs MakeChunkArgs(const GdnOptions& options, const GdnParams& params,
                        int64_t num_chunks, const int32_t* chunk_table);

// Fills args.chunk_table from args.cu_seqlens on the device (one block).
cudaError_t LaunchChunkTable(const ChunkArgs& args, cudaStream_t stream);

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_LAUNCH_H_
