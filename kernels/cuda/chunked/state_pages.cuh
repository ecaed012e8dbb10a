// The chunked prefill's state pages, shared by v7's state tile
// (state_tile.cuh) and v8's fused kernel (fused_chunk_tiles.cuh): whether a
// sequence's page ids are usable, its checkpoint count, and one element of a
// page as fp32 in any state dtype (kernels/gdn_types.h StatePageLayout: fp32
// and bf16 pages hold [Hv][K][V] elements; int8 / fp8 pages hold [Hv][K][V]
// one-byte codes and then fp32 scales [Hv][V / kStateScaleCols],
// kernels/state_quant.h).
#ifndef GDN_KERNELS_CUDA_CHUNKED_STATE_PAGES_CUH_
#define GDN_KERNELS_CUDA_CHUNKED_STATE_PAGES_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/common/page_ids.cuh"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"
#include "kernels/state_quant.h"

namespace gdn::cuda::chunked {

// Sequence n's checkpoint count (ChunkArgs::checkpoint_interval).
__device__ __forceinline__ int CheckpointCountOf(const ChunkArgs& args, int n) {
  return CheckpointCount(args.cu_seqlens[n + 1] - args.cu_seqlens[n], args.checkpoint_interval);
}

// Whether sequence n's initial page is in the pool or kZeroStatePage and
// its final page in the pool.
__device__ __forceinline__ bool EndPagesOk(const ChunkArgs& args, int n) {
  const int ip = args.initial_pages[n], fp = args.final_pages[n];
  // (ip ok && fp >= 0) && fp < num_pages: the association of the original
  // expression, which the register allocation of v7's chain depends on.
  return GDN_PAGE_IN_POOL_OR_ZERO(ip, args.num_pages) && fp >= 0 && fp < args.num_pages;
}

// Whether sequence n's page ids are usable: EndPagesOk and every checkpoint
// page in the pool or kZeroStatePage. Otherwise the pass runs on a NaN state
// (the sequence's o becomes NaN) and touches no page.
__device__ __forceinline__ bool PagesOk(const ChunkArgs& args, int n) {
  bool ok = EndPagesOk(args, n);
  const int count = CheckpointCountOf(args, n);
  for (int m = 0; m < count; ++m) {
    const int id = args.checkpoint_pages[n * args.checkpoints_per_seq + m];
    ok &= GDN_PAGE_IN_POOL_OR_ZERO(id, args.num_pages);
  }
  return ok;
}

// Where sequence n's prefix states go (checkpoint_interval > 0): the state
// after its first `done` tokens (a multiple of the interval) into slot
// first + done / interval - 1 when done < limit; the span path's phase 3
// (ChunkArgs::spans_of_one_sequence) counts from the whole sequence's.
struct CheckpointSlots {
  int first;
  int limit;
};
__device__ __forceinline__ CheckpointSlots CheckpointSlotsOf(const ChunkArgs& args, int n) {
  const int t0 = args.cu_seqlens[n];
  if (!args.spans_of_one_sequence) {
    return {n * args.checkpoints_per_seq, args.cu_seqlens[n + 1] - t0};
  }
  return {t0 / args.checkpoint_interval, args.cu_seqlens[args.num_seqs] - t0};
}

// Element `at` ((h K + d) V + e) of a page of `dtype` as fp32; int8 / fp8
// codes times the scale of their column pair. codes_bytes = Hv K V (where
// the scales start), col = h V + e.
__device__ __forceinline__ float PageElement(const char* page, StateDType dtype, int64_t at,
                                             int64_t codes_bytes, int64_t col) {
  switch (dtype) {
    case StateDType::kF32: return reinterpret_cast<const float*>(page)[at];
    case StateDType::kBF16:
      return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(page)[at]);
    case StateDType::kInt8:
    case StateDType::kFP8: {
      const float scale =
          reinterpret_cast<const float*>(page + codes_bytes)[col / kStateScaleCols];
      const uint8_t code = reinterpret_cast<const uint8_t*>(page)[at];
      return (dtype == StateDType::kInt8 ? quant::DecodeInt8(static_cast<int8_t>(code))
                                         : quant::DecodeFp8(code)) *
             scale;
    }
  }
  return 0.f;
}

// ---- int8 / fp8 stores (state_quant.h), for every store's thread layout ----

// The salt of a state stored after token `token`, head h: the raw gates of
// that token ((g, beta), or (a, b) with fused gating; [T, Hv] rows).
__device__ __forceinline__ uint32_t StoreSalt(const ChunkArgs& args, int64_t token, int h) {
  const int64_t at = token * args.num_v_heads + h;
  return args.fused_gating ? quant::RoundingSalt(args.a[at], args.b[at])
                           : quant::RoundingSalt(args.g[at], args.beta[at]);
}

// The code of page element `at` ((h K + d) V + e): x times its group's inv,
// rounded to nearest or stochastically with the store's salt.
__device__ __forceinline__ uint8_t EncodePageCode(bool int8, float x, float inv,
                                                  bool stochastic, uint32_t salt, int64_t at) {
  const uint32_t bits = stochastic ? quant::ElementBits(salt, static_cast<uint32_t>(at)) : 0u;
  return int8 ? static_cast<uint8_t>(quant::EncodeInt8(x, inv, stochastic, bits))
              : quant::EncodeFp8(x, inv, stochastic, bits);
}

}  // namespace gdn::cuda::chunked

#endif  // GDN_KERNELS_CUDA_CHUNKED_STATE_PAGES_CUH_
