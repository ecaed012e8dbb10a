// ChunkedPrefill: planning, workspace and the chunk-table kernel; the two
// main kernels launch from chunked_prefill_prep.cu / chunked_prefill_state.cu.
#include "kernels/cuda/chunked_prefill.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/chunk_table.cuh"
#include "kernels/cuda/chunked/launch.h"
#include "kernels/cuda/cuda_check.h"

namespace gdn::cuda {
namespace chunked {
namespace {

size_t Align256(size_t bytes) { return (bytes + 255) & ~static_cast<size_t>(255); }

// Byte offsets of the workspace parts (chunk_args.h): table, w, u, qg, kdt, p,
// decay, and hs, un for kernel 2's split form (else 0 bytes).
struct WorkspaceLayout {
  size_t table = 0, w = 0, u = 0, qg = 0, kdt = 0, p = 0, decay = 0, hs = 0, un = 0, total = 0;
  WorkspaceLayout(int K, int V, int Hv, int num_seqs, int64_t num_chunks, bool split_state) {
    const size_t tiles = static_cast<size_t>(num_chunks) * Hv;
    size_t at = 0;
    auto take = [&](size_t bytes) {
      const size_t here = at;
      at += Align256(bytes);
      return here;
    };
    table = take((static_cast<size_t>(num_seqs) + 1 + num_chunks) * sizeof(int32_t));
    w = take(tiles * kChunk * K * 2);
    u = take(tiles * kChunk * V * 2);
    qg = take(tiles * kChunk * K * 2);
    kdt = take(tiles * K * kChunk * 2);
    p = take(tiles * kChunk * kChunk * 2);
    decay = take(tiles * sizeof(float));
    hs = take(split_state ? tiles * V * K * 2 : 0);
    un = take(split_state ? tiles * V * kChunk * 2 : 0);
    total = at;
  }
};

}  // namespace

int64_t CountChunks(const GdnParams& params) {
  int64_t chunks = 0;
  for (int s = 0; s < params.num_seqs; ++s) {
    const int len = params.cu_seqlens_host[s + 1] - params.cu_seqlens_host[s];
    chunks += (len + kChunk - 1) / kChunk;
  }
  return chunks;
}

size_t ChunkTableBytes(int num_seqs, int64_t num_chunks) {
  return Align256((static_cast<size_t>(num_seqs) + 1 + num_chunks) * sizeof(int32_t));
}

ChunkArgs MakeChunkArgs(const GdnOptions& options, const GdnParams& params,
                        int64_t num_chunks, const int32_t* chunk_table) {
  ChunkArgs args;
  args.q = params.q;
  args.k = params.k;
  args.v = params.v;
  args.o = params.o;
  args.g = params.g;
  args.beta = params.beta;
  args.a = params.a;
  args.b = params.b;
  args.A_log = params.A_log;
  args.dt_bias = params.dt_bias;
  args.cu_seqlens = params.cu_seqlens;
  args.chunk_table = chunk_table;
  args.initial_pages = params.initial_pages;
  args.final_pages = params.final_pages;
  args.checkpoint_interval = params.checkpoint_interval;
  args.checkpoints_per_seq = params.checkpoints_per_seq;
  args.checkpoint_pages = params.checkpoint_pages;
  args.pool_base = static_cast<char*>(params.pool.base);
  args.page_bytes = params.pool.page_bytes;
  args.num_pages = params.pool.num_pages;
  args.checkpoint_pool_base = args.pool_base;
  args.checkpoint_page_bytes = args.page_bytes;
  args.checkpoint_dtype = options.state_dtype;
  args.num_seqs = params.num_seqs;
  args.num_chunks = static_cast<int32_t>(num_chunks);
  args.num_qk_heads = options.shape.num_qk_heads;
  args.num_v_heads = options.shape.num_v_heads;
  args.group_size = options.shape.group_size();
  args.scale = options.effective_scale();
  args.fused_gating = options.gating == GatingMode::kFused;
  args.l2_norm_qk = options.l2_norm_qk;
  args.io_dtype = options.input_dtype;
  args.state_dtype = options.state_dtype;
  args.stochastic_rounding = options.state_rounding == StateRounding::kStochastic;
  return args;
}

int MultiprocessorCount() {
  int device = 0, count = 132;
  if (cudaGetDevice(&device) == cudaSuccess) {
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
  }
  return count;
}

cudaError_t LaunchChunkTable(const ChunkArgs& args, cudaStream_t stream) {
  ChunkTableKernel<kTableThreads><<<1, kTableThreads, 0, stream>>>(
      args.cu_seqlens, args.num_seqs, const_cast<int32_t*>(args.chunk_table));
  return cudaGetLastError();
}

}  // namespace chunked

ChunkedPrefill::~ChunkedPrefill() {
  // cudaFree (not cudaFreeAsync): waits for the device, and stays valid when
  // the owner destroyed the stream before this destructor runs.
  if (workspace_ != nullptr) (void)cudaFree(workspace_);
  if (progress_ != nullptr) (void)cudaFree(progress_);
  if (side_stream_ != nullptr) (void)cudaStreamDestroy(side_stream_);
  if (fork_ != nullptr) (void)cudaEventDestroy(fork_);
  if (join_ != nullptr) (void)cudaEventDestroy(join_);
}

absl::Status ChunkedPrefill::Supports(const GdnOptions& options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  const LayerShape& shape = options.shape;
  if (shape.head_dim_k != 64 && shape.head_dim_k != 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunked prefill: head_dim_k must be 64 or 128, got ", shape.head_dim_k));
  }
  if (shape.head_dim_v != 64 && shape.head_dim_v != 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunked prefill: head_dim_v must be 64 or 128, got ", shape.head_dim_v));
  }
  if (shape.num_qk_heads <= 0 || shape.num_v_heads % shape.num_qk_heads != 0) {
    return absl::InvalidArgumentError("chunked prefill: num_v_heads must be a multiple of num_qk_heads");
  }
  if (options.input_dtype != DType::kBF16 && options.input_dtype != DType::kF16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunked prefill: input_dtype must be bf16 or fp16 (tensor-core operands), got ",
        DTypeName(options.input_dtype), "; fp32 inputs take the recurrent kernel"));
  }
  return absl::OkStatus();
}

size_t ChunkedPrefill::WorkspaceBytes(const GdnOptions& options, int num_seqs,
                                      int num_chunks, ChunkedStatePass form) {
  return chunked::WorkspaceLayout(options.shape.head_dim_k, options.shape.head_dim_v,
                                  options.shape.num_v_heads, num_seqs, num_chunks,
                                  form != ChunkedStatePass::kFused)
      .total;
}

absl::Status ChunkedPrefill::EnsureWorkspace(size_t bytes, int stages, cudaStream_t stream) {
  if (bytes <= workspace_bytes_) return absl::OkStatus();
  if (!(stages & 1)) {  // a new workspace would hold no tiles of the prep kernel
    return absl::FailedPreconditionError(
        "chunked prefill: the state pass alone needs the workspace of a whole call with the "
        "same params, generation and kernel-2 form first");
  }
  if (workspace_ != nullptr) {
    GDN_CUDA_RETURN_IF_ERROR(cudaFreeAsync(workspace_, stream));
    workspace_ = nullptr;
    workspace_bytes_ = 0;
  }
  const size_t grown = bytes + bytes / 4;  // headroom for growth
  GDN_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&workspace_, grown, stream));
  workspace_bytes_ = grown;
  return absl::OkStatus();
}

absl::Status ChunkedPrefill::Run(const GdnOptions& options, const GdnParams& params,
                                 cudaStream_t stream, int v_tile, int stages) {
  if (absl::Status s = Supports(options); !s.ok()) return s;
  if (absl::Status s = ValidateParams(options, params, 0); !s.ok()) return s;
  if (params.num_seqs == 0 || params.total_tokens == 0) return absl::OkStatus();
  if (v_tile != 0 && v_tile != 16 && v_tile != 32 && v_tile != 64) {
    return absl::InvalidArgumentError(absl::StrCat("chunked prefill: v_tile ", v_tile));
  }
  const int K = options.shape.head_dim_k, V = options.shape.head_dim_v;
  const int Hv = options.shape.num_v_heads;
  switch (state_pass_) {
    case ChunkedStatePass::kAuto:
    case ChunkedStatePass::kSplit:
    case ChunkedStatePass::kFused:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("chunked prefill: kernel 2 form ",
                                                     static_cast<int>(state_pass_)));
  }
  absl::StatusOr<ChunkedGeneration> generation = ResolveGeneration(options, params, v_tile);
  if (!generation.ok()) return generation.status();
  if (*generation == ChunkedGeneration::kV8Spans && stages == 3) {
    return RunV8Spans(options, params, stream);
  }
  if (*generation == ChunkedGeneration::kV8Spans) {  // a stage alone (benchmarks)
    if (generation_ != ChunkedGeneration::kAuto) {
      return absl::InvalidArgumentError("chunked prefill: the v8 span path runs whole calls only");
    }
    *generation = ChunkedGeneration::kV8;  // kAuto: the unsplit call's stages
  }
  if (*generation == ChunkedGeneration::kV8) {
    if (absl::Status s = RunV8(options, params, stream, stages); !s.ok()) return s;
    last_generation_ = ChunkedGeneration::kV8;
    last_spans_ = 1;
    return absl::OkStatus();
  }
  // v7. The V tile, then kernel 2's form for it.
  if (v_tile == 0) {
    // Blocks of the state pass: sequences x value heads x V / VT. A wider
    // tile reads each workspace tile from L2 fewer times (VT 64 halves the
    // traffic of 32) but gives fewer blocks, and one block per SM is the most
    // a sequential pass can use. So: the widest tile that still fills ~90% of
    // the SMs, else 16 (few heads x sequences: latency-bound, more blocks
    // help). H200, 2026-11-29 (bench/results/2026-11-29-prefill-v2.md, the
    // earlier kernel 2 with o on its warps): 16/32
    // 1 x 32768 VT 16/32/64 = 2.03 / 1.30 / 1.79 ms (32: 128 blocks); 16/64
    // 1 x 32768 3.96 / 2.56 / 1.75 (64: 128 blocks); 2/8 1 x 32768 1.04 /
    // 1.35 / 1.83 (16: 64 blocks); 16/32 4 x 8192 2.00 / 1.32 / 0.90 (64).
    static const int sms = chunked::MultiprocessorCount();
    const int64_t rows = static_cast<int64_t>(params.num_seqs) * Hv;
    v_tile = 16;
    for (int candidate : {64, 32}) {
      if (V % candidate == 0 && rows * (V / candidate) * 10 >= int64_t{sms} * 9) {
        v_tile = candidate;
        break;
      }
    }
  }
  const ChunkedStatePass form = ResolveStatePass(state_pass_, v_tile);
  const bool split = form == ChunkedStatePass::kSplit;
  const int64_t num_chunks = chunked::CountChunks(params);
  if (num_chunks > INT32_MAX / 2) {
    return absl::InvalidArgumentError("chunked prefill: too many tokens in one call");
  }
  const chunked::WorkspaceLayout layout(K, V, Hv, params.num_seqs, num_chunks, split);
  if (absl::Status s = EnsureWorkspace(layout.total, stages, stream); !s.ok()) return s;
  char* ws = static_cast<char*>(workspace_);

  chunked::ChunkArgs args = chunked::MakeChunkArgs(
      options, params, num_chunks, reinterpret_cast<const int32_t*>(ws + layout.table));
  args.w = reinterpret_cast<uint16_t*>(ws + layout.w);
  args.u = reinterpret_cast<uint16_t*>(ws + layout.u);
  args.qg = reinterpret_cast<uint16_t*>(ws + layout.qg);
  args.kdt = reinterpret_cast<uint16_t*>(ws + layout.kdt);
  args.p = reinterpret_cast<uint16_t*>(ws + layout.p);
  args.decay = reinterpret_cast<float*>(ws + layout.decay);
  if (split && (stages & 2)) {
    args.hs = reinterpret_cast<uint16_t*>(ws + layout.hs);
    args.un = reinterpret_cast<uint16_t*>(ws + layout.un);
    // One progress flag per chain block; a new epoch per call (flags of
    // earlier calls never match; 0 is the zeroed buffer's).
    const size_t flags = static_cast<size_t>(params.num_seqs) * Hv * (V / v_tile);
    if (flags > progress_count_) {
      if (progress_ != nullptr) GDN_CUDA_RETURN_IF_ERROR(cudaFreeAsync(progress_, stream));
      progress_ = nullptr;
      progress_count_ = 0;
      const size_t count = flags + flags / 4;
      GDN_CUDA_RETURN_IF_ERROR(
          cudaMallocAsync(reinterpret_cast<void**>(&progress_), count * 8, stream));
      GDN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(progress_, 0, count * 8, stream));
      progress_count_ = count;
    }
    if (++epoch_ == 0) epoch_ = 1;
    args.progress = progress_;
    args.progress_tiles = V / v_tile;
    args.epoch = epoch_;
  }

  if (stages & 1) {
    GDN_CUDA_RETURN_IF_ERROR(chunked::LaunchChunkTable(args, stream));
    GDN_CUDA_RETURN_IF_ERROR(chunked::LaunchChunkPrep(options, args, stream));
  }
  if (stages & 2) {
    GDN_CUDA_RETURN_IF_ERROR(
        chunked::LaunchStatePass(options, args, v_tile, form, stream));
  }
  last_generation_ = ChunkedGeneration::kV7;
  last_spans_ = 1;
  return absl::OkStatus();
}

}  // namespace gdn::cuda
