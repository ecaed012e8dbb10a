// ChunkedPrefill's v8 span path (ChunkedGeneration::kV8Spans): one sequence
// cut into spans that its value heads' CTAs walk in parallel, in the three
// phases of chunked/span_plan.h, on the caller's stream and one side stream:
//
//   stream:  arrays up, zero v, identity page, chunk tables, TPrep (whole
//            sequence) -> fork -> N runs (spans 0..P-2) ........ join ->
//            fixup (Z_p) -> phase 3 (spans 0..P-1 from Z_p) -> final copy
//   side:                         fork -> M runs (identity, v = 0) -> join
//
// Every piece lives in the one grow-only workspace (stream-ordered), laid
// out as SpanLayout below. Only phase 3 writes o and prefix states (the N and
// M runs keep their end states alone); with prefix states the spans are
// whole checkpoint intervals (chunked::SpanUnitChunks).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/fused_chunk.h"
#include "kernels/cuda/chunked/launch.h"
#include "kernels/cuda/chunked/span_fixup.h"
#include "kernels/cuda/chunked/span_plan.h"
#include "kernels/cuda/chunked_prefill.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/gdn_params.h"

namespace gdn::cuda {
namespace {

size_t Round256(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

// Byte offsets in the workspace of a span call.
struct SpanLayout {
  size_t table_whole = 0, tprep = 0, table_head = 0, table_all = 0, arrays = 0,
         checkpoint_copy = 0, zero_v = 0, scratch = 0, total = 0;
  size_t tprep_bytes = 0, scratch_page_bytes = 0;
  SpanLayout(const GdnOptions& options, int64_t chunks, int spans, size_t array_elems,
             int checkpoints) {
    const int Hqk = options.shape.num_qk_heads, Hv = options.shape.num_v_heads;
    size_t at = 0;
    auto take = [&at](size_t bytes) {
      const size_t here = at;
      at += Round256(bytes);
      return here;
    };
    table_whole = take(chunked::ChunkTableBytes(1, chunks));
    tprep_bytes = chunked::FusedChunkWorkspaceBytes(chunks, Hqk, Hv);
    tprep = take(tprep_bytes);
    table_head = take(chunked::ChunkTableBytes(spans - 1, chunks));
    table_all = take(chunked::ChunkTableBytes(spans, chunks));
    arrays = take(array_elems * sizeof(int32_t));
    checkpoint_copy = take(static_cast<size_t>(checkpoints) * sizeof(int32_t));
    zero_v = take(size_t{chunked::kChunk} * Hv * 128 * 2);
    scratch_page_bytes = Round256(static_cast<size_t>(Hv) * 128 * 128 * 4);  // fp32
    scratch = take(chunked::SpanPages{spans}.count() * scratch_page_bytes);
    total = at;
  }
};

}  // namespace

absl::Status ChunkedPrefill::RunV8Spans(const GdnOptions& options, const GdnParams& params,
                                        cudaStream_t stream) {
  const int64_t tokens = params.cu_seqlens_host[1] - params.cu_seqlens_host[0];
  const chunked::SpanPlan plan = chunked::PlanSpans(
      tokens, options.shape.num_v_heads, chunked::MultiprocessorCount(),
      generation_ == ChunkedGeneration::kV8Spans ? v8_spans_ : 0,
      chunked::SpanUnitChunks(params.checkpoint_interval));
  const int P = plan.spans();
  // The final copy stores 16-byte vectors into the real pool.
  const bool pool_aligned = reinterpret_cast<uintptr_t>(params.pool.base) % 16 == 0 &&
                            params.pool.page_bytes % 16 == 0;
  if (P < 2 || !pool_aligned) {  // too short to cut (or an odd pool): the unsplit call
    if (absl::Status s = RunV8(options, params, stream, 3); !s.ok()) return s;
    last_generation_ = ChunkedGeneration::kV8;
    last_spans_ = 1;
    return absl::OkStatus();
  }
  const int64_t chunks = chunked::CountChunks(params);
  const chunked::SpanArrays arrays = chunked::MakeSpanArrays(plan);
  const int checkpoints =
      CheckpointCount(static_cast<int32_t>(tokens), params.checkpoint_interval);
  const SpanLayout layout(options, chunks, P, arrays.data.size(), checkpoints);
  if (absl::Status s = EnsureWorkspace(layout.total, 3, stream); !s.ok()) return s;
  if (side_stream_ == nullptr) {  // all three, or none (kept for a retry)
    cudaStream_t side = nullptr;
    cudaEvent_t fork = nullptr, join = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      if (side != nullptr) (void)cudaStreamDestroy(side);
      if (fork != nullptr) (void)cudaEventDestroy(fork);
      GDN_CUDA_RETURN_IF_ERROR(e);
    }
    side_stream_ = side;
    fork_ = fork;
    join_ = join;
  }
  char* ws = static_cast<char*>(workspace_);
  int32_t* dev_arrays = reinterpret_cast<int32_t*>(ws + layout.arrays);
  // From pageable memory: copied out before cudaMemcpyAsync returns.
  GDN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev_arrays, arrays.data.data(),
                                           arrays.data.size() * sizeof(int32_t),
                                           cudaMemcpyHostToDevice, stream));
  const size_t zero_v_bytes = size_t{chunked::kChunk} * options.shape.num_v_heads * 128 * 2;
  GDN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ws + layout.zero_v, 0, zero_v_bytes, stream));

  chunked::SpanFixupArgs fix;
  fix.scratch = ws + layout.scratch;
  fix.scratch_page_bytes = static_cast<int64_t>(layout.scratch_page_bytes);
  fix.spans = P;
  fix.pool_base = static_cast<char*>(params.pool.base);
  fix.page_bytes = params.pool.page_bytes;
  fix.num_pages = params.pool.num_pages;
  fix.initial_pages = params.initial_pages;
  fix.final_pages = params.final_pages;
  fix.checkpoint_pages = params.checkpoint_pages;  // sequence 0's slots
  fix.checkpoint_count = checkpoints;
  fix.checkpoint_copy = reinterpret_cast<int32_t*>(ws + layout.checkpoint_copy);
  fix.num_v_heads = options.shape.num_v_heads;
  fix.state_dtype = options.state_dtype;
  fix.stochastic_rounding = options.state_rounding == StateRounding::kStochastic;
  const bool fused_gating = options.gating == GatingMode::kFused;
  fix.salt_gate = fused_gating ? params.a : params.g;
  fix.salt_strength = fused_gating ? params.b : params.beta;
  fix.last_token = tokens - 1;  // one sequence from token 0
  GDN_CUDA_RETURN_IF_ERROR(chunked::LaunchSpanIdentity(fix, stream));

  // TPrep over the whole sequence (its chunk table too), unless the fused
  // calls form T'' and P in their aux warpgroup (set_v8_aux_prep).
  void* tprep = ws + layout.tprep;
  const chunked::ChunkArgs whole = chunked::MakeChunkArgs(
      options, params, chunks, reinterpret_cast<const int32_t*>(ws + layout.table_whole));
  if (!v8_aux_prep_) {
    chunked::FusedChunkOptions prep;
    prep.stages = 1;
    GDN_CUDA_RETURN_IF_ERROR(chunked::LaunchFusedChunkPrefill(
        whole, 128, 128, tokens, tprep, layout.tprep_bytes, stream, prep));
  }

  // The span calls: the same tensors, other sequences and pages (scratch).
  auto span_args = [&](int num_seqs, int cu, size_t table, int init, int ends) {
    chunked::ChunkArgs a = whole;
    a.num_seqs = num_seqs;
    a.cu_seqlens = dev_arrays + cu;
    a.chunk_table = reinterpret_cast<const int32_t*>(ws + table);
    a.num_chunks = static_cast<int32_t>(plan.bounds[num_seqs] / chunked::kChunk +
                                        (plan.bounds[num_seqs] % chunked::kChunk != 0));
    a.initial_pages = dev_arrays + init;
    a.final_pages = dev_arrays + ends;
    a.pool_base = fix.scratch;
    a.page_bytes = fix.scratch_page_bytes;
    a.num_pages = chunked::SpanPages{P}.count();
    a.state_dtype = StateDType::kF32;  // the scratch pages (span_fixup.h says why)
    return a;
  };
  // Phase 1 keeps end states only: no o, no prefix states (not yet the
  // sequence's).
  chunked::ChunkArgs n_runs =
      span_args(P - 1, arrays.cu_head, layout.table_head, arrays.zero_init, arrays.n_pages);
  n_runs.o = nullptr;
  n_runs.checkpoint_interval = 0;
  chunked::ChunkArgs m_runs = n_runs;
  m_runs.initial_pages = dev_arrays + arrays.identity;
  m_runs.final_pages = dev_arrays + arrays.m_pages;
  // Phase 3 stores the prefix states (in the real pool, whole's checkpoint
  // pool) into the fixup's copy of the slots.
  chunked::ChunkArgs all =
      span_args(P, arrays.cu_all, layout.table_all, arrays.z_pages, arrays.ends);
  all.spans_of_one_sequence = true;
  all.checkpoint_pages = fix.checkpoint_copy;
  GDN_CUDA_RETURN_IF_ERROR(chunked::LaunchChunkTable(n_runs, stream));
  GDN_CUDA_RETURN_IF_ERROR(chunked::LaunchChunkTable(all, stream));

  chunked::FusedChunkOptions fused;
  fused.stages = 2;
  fused.layout_chunks = chunks;
  fused.aux_prep = v8_aux_prep_;
  chunked::FusedChunkOptions fused_zero_v = fused;
  fused_zero_v.zero_v = ws + layout.zero_v;
  const int64_t head_tokens = plan.bounds[P - 1];
  // Phase 1: N runs here, M runs on the side stream, at once.
  GDN_CUDA_RETURN_IF_ERROR(cudaEventRecord(fork_, stream));
  GDN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(side_stream_, fork_, 0));
  GDN_CUDA_RETURN_IF_ERROR(chunked::LaunchFusedChunkPrefill(
      n_runs, 128, 128, head_tokens, tprep, layout.tprep_bytes, stream, fused));
  const cudaError_t m_error = chunked::LaunchFusedChunkPrefill(
      m_runs, 128, 128, head_tokens, tprep, layout.tprep_bytes, side_stream_, fused_zero_v);
  // Joined even after an error, so that the side stream never runs behind
  // the caller's next use of the workspace.
  GDN_CUDA_RETURN_IF_ERROR(cudaEventRecord(join_, side_stream_));
  GDN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, join_, 0));
  GDN_CUDA_RETURN_IF_ERROR(m_error);
  // Phase 2, phase 3, the final page.
  GDN_CUDA_RETURN_IF_ERROR(chunked::LaunchSpanFixup(fix, stream));
  GDN_CUDA_RETURN_IF_ERROR(chunked::LaunchFusedChunkPrefill(
      all, 128, 128, tokens, tprep, layout.tprep_bytes, stream, fused));
  GDN_CUDA_RETURN_IF_ERROR(chunked::LaunchSpanFinalCopy(fix, stream));
  last_generation_ = ChunkedGeneration::kV8Spans;
  last_spans_ = P;
  return absl::OkStatus();
}

}  // namespace gdn::cuda
