// TPrep's step 0 (tprep.cuh): the per-token gates of one value head of a
// 64-token chunk, copied into shared memory one head ahead of their use
// (cp.async, so the global latency hides under the previous head's work
// without holding registers), turned into g, beta (v7's formulas), and the
// in-chunk prefix sum G with its workspace outputs (tprep_args.h). All of it
// runs in warp 0 of the block, lane l owning tokens 2 l and 2 l + 1.
#ifndef GDN_KERNELS_CUDA_CHUNKED_TPREP_GATES_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_TPREP_GATES_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/gate_prefix.cuh"
#include "kernels/cuda/chunked/tprep_args.h"
#include "kernels/cuda/common/cp_async.cuh"
#include "kernels/gating.h"

namespace gdn::cuda::chunked {

// Warp 0 of the block, lane l: starts the copies of the per-token gating
// inputs of tokens 2 l and 2 l + 1 (t0 + i), value head h, into raw
// [2][64] fp32 (x: direct g or fused a; y: direct beta or fused b) and
// commits them as one group; nothing is read for padding tokens (i >= L).
// Issued one value head ahead of their use (step 0), so the global latency
// hides under the previous head's work without holding registers.
__device__ __forceinline__ void StartGateCopies(const ChunkArgs& args, int t0, int L, int h,
                                                int lane, float* raw) {
  const float* x = args.fused_gating ? args.a : args.g;
  const float* y = args.fused_gating ? args.b : args.beta;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int i = 2 * lane + u;
    if (i < L) {
      const int64_t idx = static_cast<int64_t>(t0 + i) * args.num_v_heads + h;
      CopyAsync4(raw + i, x + idx);
      CopyAsync4(raw + 64 + i, y + idx);
    }
  }
  CopyAsyncCommit();
}

// g, beta of token i from its raw inputs (raw as above), exactly as v7 did
// at the point of use (padding i >= L: no decay, beta 0).
__device__ __forceinline__ void GateOf(const ChunkArgs& args, const float* raw, int h, int i,
                                       int L, float& g, float& beta) {
  g = beta = 0.f;
  if (i < L) {
    if (args.fused_gating) {
      g = FusedDecay(raw[i], args.A_log[h], args.dt_bias[h]);
      beta = FusedBeta(raw[64 + i]);
    } else {
      g = raw[i];
      beta = raw[64 + i];
    }
  }
}

// Step 0 of value head h (chunk-head index ch) by warp 0, once its copies
// (StartGateCopies into raw) have landed: lane l takes tokens 2 l and
// 2 l + 1 (g, beta), the inclusive prefix sum G of g over the 64 tokens
// (v7's order), G and beta to G_s, beta_s, and G, exp(G), exp(G_last - G),
// exp(G_last) to the workspace.
__device__ __forceinline__ void GatePrefix(const ChunkArgs& args, const TPrepWorkspace& ws,
                                           const float* raw, int h, int64_t ch, int L, int lane,
                                           float* G_s, float* beta_s) {
  CopyAsyncWaitAll();  // each lane reads only the two tokens it copied
  __syncwarp();
  const int i0 = 2 * lane, i1 = 2 * lane + 1;
  float x0, x1, b0, b1;
  GateOf(args, raw, h, i0, L, x0, b0);
  GateOf(args, raw, h, i1, L, x1, b1);
  *reinterpret_cast<float2*>(beta_s + i0) = make_float2(b0, b1);
  float G0, G1, g_last;
  WarpChunkPrefix(x0, x1, lane, G0, G1, g_last);
  *reinterpret_cast<float2*>(G_s + i0) = make_float2(G0, G1);
  *reinterpret_cast<float2*>(ws.g_cum + ch * 64 + i0) = make_float2(G0, G1);
  *reinterpret_cast<float2*>(ws.eg + ch * 64 + i0) =
      make_float2(i0 < L ? expf(G0) : 0.f, i1 < L ? expf(G1) : 0.f);
  *reinterpret_cast<float2*>(ws.ed + ch * 64 + i0) =
      make_float2(i0 < L ? expf(g_last - G0) : 0.f, i1 < L ? expf(g_last - G1) : 0.f);
  if (lane == 0) ws.decay[ch] = expf(g_last);
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_TPREP_GATES_CUH_
