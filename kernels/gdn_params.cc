#include "kernels/gdn_params.h"

#include "absl/strings/str_cat.h"

namespace gdn {
namespace {

absl::Status Missing(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be set (", why, ")"));
}

}  // namespace

absl::Status ValidateParams(const GdnOptions& options, const GdnParams& p,
                            int max_tokens_per_seq) {
  if (p.num_seqs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_seqs must be >= 1, got ", p.num_seqs));
  }
  if (p.cu_seqlens == nullptr) return Missing("cu_seqlens", "always");
  if (p.cu_seqlens_host == nullptr) return Missing("cu_seqlens_host", "always");
  if (p.cu_seqlens_host[0] != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cu_seqlens[0] must be 0, got ", p.cu_seqlens_host[0]));
  }
  for (int32_t i = 0; i < p.num_seqs; ++i) {
    const int32_t len = p.cu_seqlens_host[i + 1] - p.cu_seqlens_host[i];
    if (len < 1 || (max_tokens_per_seq > 0 && len > max_tokens_per_seq)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", i, " has ", len, " tokens; expected 1..",
          max_tokens_per_seq > 0 ? absl::StrCat(max_tokens_per_seq)
                                 : std::string("any")));
    }
  }
  if (p.cu_seqlens_host[p.num_seqs] != p.total_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cu_seqlens[num_seqs] = ", p.cu_seqlens_host[p.num_seqs],
        " but total_tokens = ", p.total_tokens));
  }
  if (!p.q) return Missing("q", "always");
  if (!p.k) return Missing("k", "always");
  if (!p.v) return Missing("v", "always");
  if (!p.o) return Missing("o", "always");
  if (options.gating == GatingMode::kDirect) {
    if (!p.g) return Missing("g", "gating=direct");
    if (!p.beta) return Missing("beta", "gating=direct");
  } else {
    if (!p.a) return Missing("a", "gating=fused");
    if (!p.b) return Missing("b", "gating=fused");
    if (!p.A_log) return Missing("A_log", "gating=fused");
    if (!p.dt_bias) return Missing("dt_bias", "gating=fused");
  }
  if (!p.initial_pages) return Missing("initial_pages", "always");
  if (!p.final_pages) return Missing("final_pages", "always");
  if (!p.pool.base) return Missing("pool.base", "always");
  if (p.checkpoint_interval != 0) {
    if (p.checkpoint_interval == kPerTokenStates) {
      for (int32_t i = 0; i < p.num_seqs; ++i) {
        const int32_t len = p.cu_seqlens_host[i + 1] - p.cu_seqlens_host[i];
        if (len > kMaxDecodeTokens) {
          return absl::InvalidArgumentError(absl::StrCat(
              "checkpoint_interval 1 (per-token states) takes sequences of at most ",
              kMaxDecodeTokens, " tokens; sequence ", i, " has ", len));
        }
      }
    } else if (p.checkpoint_interval < 0 || p.checkpoint_interval % kCheckpointTokens != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint_interval must be a positive multiple of ", kCheckpointTokens,
                       " tokens, 1 (per-token states) or 0 (none), got ", p.checkpoint_interval));
    }
    if (!p.checkpoint_pages) return Missing("checkpoint_pages", "checkpoint_interval > 0");
    for (int32_t i = 0; i < p.num_seqs; ++i) {
      const int32_t len = p.cu_seqlens_host[i + 1] - p.cu_seqlens_host[i];
      const int32_t need = CheckpointCount(len, p.checkpoint_interval);
      if (need > p.checkpoints_per_seq) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence ", i, " has ", len, " tokens: ", need, " checkpoints at interval ",
            p.checkpoint_interval, " but checkpoints_per_seq = ", p.checkpoints_per_seq));
      }
    }
  }
  if (p.pool.dtype != options.state_dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pool dtype ", StateDTypeName(p.pool.dtype),
        " differs from options.state_dtype ",
        StateDTypeName(options.state_dtype)));
  }
  const StatePageLayout layout =
      StatePageLayout::For(options.shape, options.state_dtype);
  if (p.pool.page_bytes < static_cast<int64_t>(layout.page_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pool.page_bytes ", p.pool.page_bytes, " < ",
                     layout.page_bytes, " needed for ", DescribeOptions(options)));
  }
  return absl::OkStatus();
}

}  // namespace gdn
