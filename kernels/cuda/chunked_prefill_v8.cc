// ChunkedPrefill's generation routing (ChunkedGeneration) and its v8 call:
// which calls v8 (kernels/cuda/chunked/fused_chunk.h, form P) can run, the
// kAuto rule, and the launch over the shared grow-only workspace. Host code
// only; v7's path is chunked_prefill.cu.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/fused_chunk.h"
#include "kernels/cuda/chunked/launch.h"
#include "kernels/cuda/chunked/span_plan.h"
#include "kernels/cuda/chunked_prefill.h"
#include "kernels/cuda/cuda_check.h"

namespace gdn::cuda {
namespace {

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Why v8 cannot run this call (empty: it can), from the call alone (not
// the device): FusedChunkSupports' shape / dtype / checkpoint rules, plus
// the 16-byte alignment its TMA tensor maps (q, k, v) and 16-byte o stores
// need. The server's tensors are cudaMalloc'd and token-strided by multiples
// of 256 bytes at K = V = 128, so only odd external callers fail the latter.
std::string V8Refusal(const GdnOptions& options, const GdnParams& params) {
  const chunked::ChunkArgs args = chunked::MakeChunkArgs(options, params, 0, nullptr);
  const cudaError_t e =
      chunked::FusedChunkSupports(args, options.shape.head_dim_k, options.shape.head_dim_v);
  if (e != cudaSuccess) {
    return absl::StrCat("v8 takes K = V = 128, bf16 / fp16 inputs and checkpoints at "
                        "multiples of 64 tokens (",
                        cudaGetErrorName(e), ")");
  }
  if (!Aligned16(params.q) || !Aligned16(params.k) || !Aligned16(params.v) ||
      !Aligned16(params.o)) {
    return "v8 needs q, k, v and o 16-byte aligned";
  }
  return "";
}

}  // namespace

bool ChunkedPrefill::DeviceRunsV8() const {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (device != v8_device_) {
    int major = 0, minor = 0;
    const bool read =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
            cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess;
    // fused_chunk.cu carries sm_90a SASS alone (wgmma, setmaxnreg): it loads
    // on compute capability 9.0 and nowhere else.
    v8_device_ok_ = read && major == 9 && minor == 0;
    v8_device_ = device;
  }
  return v8_device_ok_;
}

int ChunkedPrefill::V8MinUnits() const {
  if (v8_min_units_ >= 0) return v8_min_units_;
  static const int sms = chunked::MultiprocessorCount();
  return DefaultV8MinUnits(sms);
}

int ChunkedPrefill::AutoSpans(const GdnOptions& options, const GdnParams& params) {
  if (params.num_seqs != 1 || params.cu_seqlens_host == nullptr) return 1;
  static const int sms = chunked::MultiprocessorCount();
  const int64_t tokens = params.cu_seqlens_host[1] - params.cu_seqlens_host[0];
  if (tokens < kAutoSpansMinTokens) return 1;
  return chunked::PlanSpans(tokens, options.shape.num_v_heads, sms, 0,
                            chunked::SpanUnitChunks(params.checkpoint_interval))
      .spans();
}

size_t ChunkedPrefill::V8WorkspaceBytes(const GdnOptions& options, int num_seqs,
                                        int64_t num_chunks) {
  return chunked::ChunkTableBytes(num_seqs, num_chunks) +
         chunked::FusedChunkWorkspaceBytes(num_chunks, options.shape.num_qk_heads,
                                           options.shape.num_v_heads);
}

absl::StatusOr<ChunkedGeneration> ChunkedPrefill::ResolveGeneration(const GdnOptions& options,
                                                                    const GdnParams& params,
                                                                    int v_tile) const {
  switch (generation_) {
    case ChunkedGeneration::kV7:
      return ChunkedGeneration::kV7;
    case ChunkedGeneration::kAuto:
    case ChunkedGeneration::kV8:
    case ChunkedGeneration::kV8Spans:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("chunked prefill: generation ",
                                                     static_cast<int>(generation_)));
  }
  const bool forced =
      generation_ == ChunkedGeneration::kV8 || generation_ == ChunkedGeneration::kV8Spans;
  // v_tile and the state pass are v7's knobs: asking for one means v7.
  if (v_tile != 0 || state_pass_ != ChunkedStatePass::kAuto) {
    if (!forced) return ChunkedGeneration::kV7;
    return absl::InvalidArgumentError(
        "chunked prefill: v8 has no V tile or kernel-2 form (v7's knobs); leave them at 0 / "
        "kAuto");
  }
  if (const std::string why = V8Refusal(options, params); !why.empty()) {
    if (!forced) return ChunkedGeneration::kV7;
    return absl::InvalidArgumentError(absl::StrCat("chunked prefill: ", why));
  }
  if (!DeviceRunsV8()) {
    if (!forced) return ChunkedGeneration::kV7;
    return absl::FailedPreconditionError(
        "chunked prefill: v8 runs on compute capability 9.0 (sm_90a) only");
  }
  if (generation_ == ChunkedGeneration::kV8Spans) {
    if (params.num_seqs != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunked prefill: the v8 span path cuts one sequence, got ", params.num_seqs));
    }
    return ChunkedGeneration::kV8Spans;
  }
  if (forced) return ChunkedGeneration::kV8;
  // kAuto: one sequence long enough to cut into 3 or more spans takes the
  // span path (AutoSpans says why);
  if (AutoSpans(options, params) >= 3) return ChunkedGeneration::kV8Spans;
  // else enough (sequence, value head) units for v8's one CTA per unit
  // (DefaultV8MinUnits says why).
  const int64_t units = static_cast<int64_t>(params.num_seqs) * options.shape.num_v_heads;
  return units >= V8MinUnits() ? ChunkedGeneration::kV8 : ChunkedGeneration::kV7;
}

absl::Status ChunkedPrefill::RunV8(const GdnOptions& options, const GdnParams& params,
                                   cudaStream_t stream, int stages) {
  const int64_t num_chunks = chunked::CountChunks(params);
  if (num_chunks > INT32_MAX / 2) {
    return absl::InvalidArgumentError("chunked prefill: too many tokens in one call");
  }
  // [chunk table | TPrep workspace], both 256-byte aligned (cudaMallocAsync
  // gives at least 256; ChunkTableBytes is a multiple of it).
  const size_t table_bytes = chunked::ChunkTableBytes(params.num_seqs, num_chunks);
  // The aux warpgroup's form (fused_chunk.h) needs no TPrep workspace.
  const bool aux = v8_aux_prep_;
  const size_t tprep_bytes =
      aux ? 0
          : chunked::FusedChunkWorkspaceBytes(num_chunks, options.shape.num_qk_heads,
                                              options.shape.num_v_heads);
  if (absl::Status s = EnsureWorkspace(table_bytes + tprep_bytes, stages, stream); !s.ok()) {
    return s;
  }
  char* ws = static_cast<char*>(workspace_);
  const chunked::ChunkArgs args = chunked::MakeChunkArgs(
      options, params, num_chunks, reinterpret_cast<const int32_t*>(ws));
  chunked::FusedChunkOptions fused;
  fused.stages = stages;
  fused.aux_prep = aux;
  GDN_CUDA_RETURN_IF_ERROR(chunked::LaunchFusedChunkPrefill(
      args, options.shape.head_dim_k, options.shape.head_dim_v, params.total_tokens,
      ws + table_bytes, workspace_bytes_ - table_bytes, stream, fused));
  return absl::OkStatus();
}

}  // namespace gdn::cuda
