// The one runtime-to-template dispatch of the recurrent kernel family:
// options (K, V, input dtype, state dtype) and the block-shape variant to a
// compiled instance (recurrent_instances_<dtype>.cu). Everything else about
// the family's host side lives here too.
#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/common/head_dims.h"
#include "kernels/cuda/recurrent_instances.h"
#include "kernels/cuda/recurrent_params.h"

namespace gdn::cuda {
namespace {

// kAuto's thresholds in (sequence, value head) pairs, from the H200 sweeps of
// bench/decode (bench/results/2026-11-29-decode.md, three machines): up to 64
// pairs (batch 1-2 at Hv 32) the launch is latency-bound and the small
// blocks win; bf16 pages stream best through the persistent grid at every
// larger size; fp32 pages through the persistent grid up to a few hundred
// pairs and through the wide blocks (64 registers, 4 resident blocks) above.
constexpr int64_t kSmallGridHeads = 64;
constexpr int64_t kFp32WideMinHeads = 512;

bool Aligned16(const void* ptr) {
  return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0;
}

// The variant's compiled shape for this state dtype (recurrent_instances.h);
// kWide only where RecurrentVariantShapes<StateT>::kHasWide (fp32 pages).
template <typename InT, typename StateT, int kK, int kV>
absl::Status DispatchVariant(const RecurrentParams& params, cudaStream_t stream,
                             RecurrentVariant variant) {
  using Shapes = RecurrentVariantShapes<StateT>;
  switch (variant) {
    case RecurrentVariant::kSmall:
      return LaunchRecurrentShape<kK, kV, Shapes::kSmallTile, Shapes::kSmallThreads,
                                  Shapes::kSmallMinBlocks, false, InT, StateT>(params, stream);
    case RecurrentVariant::kPersistent:
      return LaunchRecurrentShape<kK, kV, Shapes::kPersistentTile, Shapes::kPersistentThreads,
                                  Shapes::kPersistentMinBlocks, true, InT, StateT>(params,
                                                                                   stream);
    case RecurrentVariant::kWide:
      if constexpr (Shapes::kHasWide) {
        return LaunchRecurrentShape<kK, kV, Shapes::kWideTile, Shapes::kWideThreads,
                                    Shapes::kWideMinBlocks, false, InT, StateT>(params, stream);
      } else {
        return absl::InvalidArgumentError(
            "recurrent kernel: variant wide is compiled for fp32 states only (small and "
            "persistent are compiled for every state dtype)");
      }
    case RecurrentVariant::kAuto:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("recurrent kernel: variant code ",
                                                 static_cast<int>(variant), " is not compiled"));
}

template <typename InT, typename StateT>
absl::Status DispatchHeadDimsFor(const GdnOptions& options, const RecurrentParams& params,
                                 cudaStream_t stream, RecurrentVariant variant) {
  const int K = options.shape.head_dim_k;
  const int V = options.shape.head_dim_v;
  return DispatchHeadDims(
      K, V,
      [&](auto k, auto v) {
        return DispatchVariant<InT, StateT, decltype(k)::value, decltype(v)::value>(
            params, stream, variant);
      },
      [&] {
        return absl::InvalidArgumentError(absl::StrCat(
            "recurrent kernel: unsupported head dims K=", K, " V=", V, " (64 or 128 each)"));
      });
}

template <typename InT>
absl::Status DispatchState(const GdnOptions& options, const RecurrentParams& params,
                           cudaStream_t stream, RecurrentVariant variant) {
  switch (options.state_dtype) {
    case StateDType::kF32:
      return DispatchHeadDimsFor<InT, float>(options, params, stream, variant);
    case StateDType::kBF16:
      return DispatchHeadDimsFor<InT, __nv_bfloat16>(options, params, stream, variant);
    case StateDType::kInt8:
    case StateDType::kFP8:
      if constexpr (std::is_same_v<InT, __half>) {
        return absl::InvalidArgumentError(
            "recurrent kernel: fp16 inputs with int8 / fp8 states are not compiled (use bf16 "
            "or fp32 activations)");
      } else if (options.state_dtype == StateDType::kInt8) {
        return DispatchHeadDimsFor<InT, QInt8>(options, params, stream, variant);
      } else {
        return DispatchHeadDimsFor<InT, QFp8>(options, params, stream, variant);
      }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "recurrent kernel: unsupported state dtype ", static_cast<int>(options.state_dtype)));
}

}  // namespace

const char* RecurrentVariantName(RecurrentVariant variant) {
  switch (variant) {
    case RecurrentVariant::kAuto: return "auto";
    case RecurrentVariant::kSmall: return "small";
    case RecurrentVariant::kWide: return "wide";
    case RecurrentVariant::kPersistent: return "persistent";
  }
  return "unknown";
}

bool IsRecurrentVariantCode(int code) {
  switch (static_cast<RecurrentVariant>(code)) {
    case RecurrentVariant::kAuto:
    case RecurrentVariant::kSmall:
    case RecurrentVariant::kWide:
    case RecurrentVariant::kPersistent:
      return true;
  }
  return false;
}

RecurrentVariant ResolveRecurrentVariant(const GdnOptions& options, int32_t num_seqs,
                                         RecurrentVariant requested) {
  if (requested != RecurrentVariant::kAuto) return requested;
  // (sequence, value head) pairs: the work, whatever the tile.
  const int64_t heads = static_cast<int64_t>(num_seqs) * options.shape.num_v_heads;
  if (heads <= kSmallGridHeads) return RecurrentVariant::kSmall;  // latency-bound
  if (options.state_dtype == StateDType::kF32) {
    return heads < kFp32WideMinHeads ? RecurrentVariant::kPersistent : RecurrentVariant::kWide;
  }
  return RecurrentVariant::kPersistent;
}

RecurrentParams MakeRecurrentParams(const GdnOptions& options, const GdnParams& params) {
  RecurrentParams p;
  p.q = params.q;
  p.k = params.k;
  p.v = params.v;
  p.o = params.o;
  p.g = params.g;
  p.beta = params.beta;
  p.a = params.a;
  p.b = params.b;
  p.A_log = params.A_log;
  p.dt_bias = params.dt_bias;
  p.cu_seqlens = params.cu_seqlens;
  p.initial_pages = params.initial_pages;
  p.final_pages = params.final_pages;
  p.checkpoint_interval = params.checkpoint_interval;
  p.checkpoints_per_seq = params.checkpoints_per_seq;
  p.checkpoint_pages = params.checkpoint_pages;
  p.pool_base = static_cast<char*>(params.pool.base);
  p.page_bytes = params.pool.page_bytes;
  p.num_pages = params.pool.num_pages;
  p.num_seqs = params.num_seqs;
  p.num_qk_heads = options.shape.num_qk_heads;
  p.num_v_heads = options.shape.num_v_heads;
  p.group_size = options.shape.group_size();
  p.scale = options.effective_scale();
  p.fused_gating = options.gating == GatingMode::kFused;
  p.l2_norm_qk = options.l2_norm_qk;
  p.stochastic_rounding = options.state_rounding == StateRounding::kStochastic;
  return p;
}

absl::Status LaunchRecurrent(const GdnOptions& options, const RecurrentParams& launch_params,
                             cudaStream_t stream, RecurrentVariant variant, bool pdl) {
  RecurrentParams params = launch_params;
  params.pdl = pdl;
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  if (params.num_seqs < 1) return absl::OkStatus();
  if (!Aligned16(params.q) || !Aligned16(params.k) || !Aligned16(params.v) ||
      !Aligned16(params.o) || !Aligned16(params.pool_base) || params.page_bytes % 16 != 0) {
    return absl::InvalidArgumentError(
        "recurrent kernel: q, k, v, o and the state pool (base and page_bytes) must be "
        "16-byte aligned");
  }
  const RecurrentVariant resolved = ResolveRecurrentVariant(options, params.num_seqs, variant);
  switch (options.input_dtype) {
    case DType::kF32:
      return DispatchState<float>(options, params, stream, resolved);
    case DType::kBF16:
      return DispatchState<__nv_bfloat16>(options, params, stream, resolved);
    case DType::kF16:
      return DispatchState<__half>(options, params, stream, resolved);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "recurrent kernel: unsupported input dtype ", static_cast<int>(options.input_dtype)));
}

}  // namespace gdn::cuda
