// The C ABI of gdn_capi.h: decode over the recurrent kernel family, prefill
// through the cuda backend's routing policy (kernels/cuda/cuda_backend_impl.h:
// PrefersChunkedPrefill / LaunchPrefill) with one chunked-prefill launcher
// (and workspace) per stream.
#include "kernels/capi/gdn_capi.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/chunked_prefill.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/recurrent_params.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn {
namespace {

thread_local std::string g_last_error;

int Finish(const absl::Status& status) {
  if (status.ok()) {
    g_last_error.clear();
    return GDN_CAPI_OK;
  }
  g_last_error = status.ToString();
  return static_cast<int>(status.code());
}

absl::Status ToOptions(const gdn_capi_config* c, GdnOptions* options) {
  if (c == nullptr) return absl::InvalidArgumentError("config is NULL");
  options->shape.num_qk_heads = c->num_qk_heads;
  options->shape.num_v_heads = c->num_v_heads;
  options->shape.head_dim_k = c->head_dim_k;
  options->shape.head_dim_v = c->head_dim_v;
  if (c->input_dtype < 0 || c->input_dtype > 2) {
    return absl::InvalidArgumentError(absl::StrCat("input_dtype code ", c->input_dtype));
  }
  if (c->state_dtype < 0 || c->state_dtype > 3) {
    return absl::InvalidArgumentError(absl::StrCat("state_dtype code ", c->state_dtype));
  }
  if (c->gating < 0 || c->gating > 1) {
    return absl::InvalidArgumentError(absl::StrCat("gating code ", c->gating));
  }
  options->input_dtype = static_cast<DType>(c->input_dtype);
  options->state_dtype = static_cast<StateDType>(c->state_dtype);
  options->gating = static_cast<GatingMode>(c->gating);
  options->l2_norm_qk = c->l2_norm_qk != 0;
  options->scale = c->scale;
  return ValidateOptions(*options);
}

GdnParams ToParams(const gdn_capi_args& a, StateDType state_dtype) {
  GdnParams p;
  p.num_seqs = a.num_seqs;
  p.total_tokens = a.total_tokens;
  p.cu_seqlens = a.cu_seqlens;
  p.cu_seqlens_host = a.cu_seqlens_host;
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.o = a.o;
  p.g = a.g;
  p.beta = a.beta;
  p.a = a.a;
  p.b = a.b;
  p.A_log = a.A_log;
  p.dt_bias = a.dt_bias;
  p.initial_pages = a.initial_pages;
  p.final_pages = a.final_pages;
  p.pool.base = a.pool_base;
  p.pool.page_bytes = a.page_bytes;
  p.pool.num_pages = a.num_pages;
  p.pool.dtype = state_dtype;
  return p;
}

absl::Status Run(const gdn_capi_config* config, const gdn_capi_args* args, void* stream,
                 int max_tokens_per_seq, cuda::RecurrentVariant variant, bool pdl = false) {
  GdnOptions options;
  if (absl::Status s = ToOptions(config, &options); !s.ok()) return s;
  if (args == nullptr) return absl::InvalidArgumentError("args is NULL");
  const GdnParams params = ToParams(*args, options.state_dtype);
  if (absl::Status s = ValidateParams(options, params, max_tokens_per_seq); !s.ok()) return s;
  // Decode (prefill goes through RunPrefill below).
  return cuda::LaunchRecurrent(options, cuda::MakeRecurrentParams(options, params),
                               static_cast<cudaStream_t>(stream), variant, pdl);
}

// One chunked-prefill launcher (and workspace) per stream, for the life of
// the process; a call holds the lock while it plans and launches.
struct Launchers {
  std::mutex mu;
  std::map<void*, std::unique_ptr<cuda::ChunkedPrefill>> by_stream;
};
Launchers& GetLaunchers() {
  static Launchers* launchers = new Launchers();  // never destroyed (exit order)
  return *launchers;
}

// gdn_chunked_prefill_tuned's prep_variant code of the one kernel 1.
constexpr int kPrepCode = 4;
// state_variant kSpansCode + P: the v8 span path with P spans.
constexpr int kSpansCode = 900;

// gdn_chunked_prefill_tuned's state_variant code to the generation, v7
// form and span count: 0 auto (the router: v8 where it runs the call,
// ChunkedPrefill::ResolveGeneration), 4 / 5 v7's split / fused form, 7 v7
// (form auto), 8 v8 (refused where it cannot run the call), 9 v8's span
// path with its planned span count, 900 + P (P in 2 .. 64) that path with P
// spans; false for any other code.
bool ToStatePass(int code, cuda::ChunkedGeneration* generation, cuda::ChunkedStatePass* form,
                 int* spans) {
  *generation = cuda::ChunkedGeneration::kAuto;
  *form = cuda::ChunkedStatePass::kAuto;
  *spans = 0;
  if (code >= kSpansCode + 2 && code <= kSpansCode + 64) {
    *generation = cuda::ChunkedGeneration::kV8Spans;
    *spans = code - kSpansCode;
    return true;
  }
  switch (code) {
    case static_cast<int>(cuda::ChunkedStatePass::kAuto):
      return true;
    case static_cast<int>(cuda::ChunkedStatePass::kSplit):
    case static_cast<int>(cuda::ChunkedStatePass::kFused):
      *generation = cuda::ChunkedGeneration::kV7;
      *form = static_cast<cuda::ChunkedStatePass>(code);
      return true;
    case static_cast<int>(cuda::ChunkedGeneration::kV7):
    case static_cast<int>(cuda::ChunkedGeneration::kV8):
    case static_cast<int>(cuda::ChunkedGeneration::kV8Spans):
      *generation = static_cast<cuda::ChunkedGeneration>(code);
      return true;
  }
  return false;
}

// The chunked kernel's knobs (gdn_chunked_prefill_tuned); defaults: the operator.
struct ChunkedKnobs {
  int v_tile = 0;
  int stages = 3;
  int prep_variant = -1;
  int state_variant = -1;
};

absl::Status RunPrefill(const gdn_capi_config* config, const gdn_capi_args* args, void* stream,
                        cuda::PrefillKernel kernel, const ChunkedKnobs& knobs = ChunkedKnobs()) {
  GdnOptions options;
  if (absl::Status s = ToOptions(config, &options); !s.ok()) return s;
  if (args == nullptr) return absl::InvalidArgumentError("args is NULL");
  const GdnParams params = ToParams(*args, options.state_dtype);
  if (absl::Status s = ValidateParams(options, params, 0); !s.ok()) return s;
  const cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  const bool chunked = kernel == cuda::PrefillKernel::kChunked ||
                       (kernel == cuda::PrefillKernel::kAuto &&
                        cuda::PrefersChunkedPrefill(options, params));
  if (!chunked) {
    return cuda::LaunchRecurrent(options, cuda::MakeRecurrentParams(options, params), cuda_stream);
  }
  if (absl::Status s = cuda::ChunkedPrefill::Supports(options); !s.ok()) return s;
  if (knobs.stages < 1 || knobs.stages > 3) {
    return absl::InvalidArgumentError(absl::StrCat("stages ", knobs.stages));
  }
  // Kernel 1 has one form (code 4, the default); code 3 (fp32 merges) and
  // 0 - 2 were removed.
  if (knobs.prep_variant != -1 && knobs.prep_variant != kPrepCode) {
    return absl::InvalidArgumentError(absl::StrCat("prep_variant ", knobs.prep_variant,
                                                   " (only -1 and 4 remain)"));
  }
  cuda::ChunkedGeneration generation = cuda::ChunkedGeneration::kAuto;
  cuda::ChunkedStatePass state_pass = cuda::ChunkedStatePass::kAuto;
  int spans = 0;
  if (knobs.state_variant != -1 &&
      !ToStatePass(knobs.state_variant, &generation, &state_pass, &spans)) {
    return absl::InvalidArgumentError(absl::StrCat("state_variant ", knobs.state_variant));
  }
  Launchers& launchers = GetLaunchers();
  std::lock_guard<std::mutex> lock(launchers.mu);
  std::unique_ptr<cuda::ChunkedPrefill>& launcher = launchers.by_stream[stream];
  if (launcher == nullptr) launcher = std::make_unique<cuda::ChunkedPrefill>();
  launcher->set_state_pass(state_pass);
  launcher->set_generation(generation);
  launcher->set_v8_spans(spans);
  if (knobs.v_tile == 0 && knobs.stages == 3) {  // the routed operator itself
    return cuda::LaunchPrefill(options, params, cuda_stream, *launcher,
                               cuda::PrefillKernel::kChunked);
  }
  return launcher->Run(options, params, cuda_stream, knobs.v_tile, knobs.stages);
}

}  // namespace
}  // namespace gdn

extern "C" {

int gdn_decode(const gdn_capi_config* config, const gdn_capi_args* args, void* stream) {
  return gdn::Finish(gdn::Run(config, args, stream, gdn::kMaxDecodeTokens,
                              gdn::cuda::RecurrentVariant::kAuto));
}

int gdn_prefill(const gdn_capi_config* config, const gdn_capi_args* args, void* stream) {
  return gdn::Finish(gdn::RunPrefill(config, args, stream, gdn::cuda::PrefillKernel::kAuto));
}

int gdn_prefill_variant(const gdn_capi_config* config, const gdn_capi_args* args, void* stream,
                        int variant) {
  if (variant < 0 || variant > 2) {
    return gdn::Finish(absl::InvalidArgumentError(absl::StrCat("prefill variant code ", variant)));
  }
  return gdn::Finish(
      gdn::RunPrefill(config, args, stream, static_cast<gdn::cuda::PrefillKernel>(variant)));
}

int gdn_chunked_prefill_tuned(const gdn_capi_config* config, const gdn_capi_args* args,
                              void* stream, int v_tile, int stages, int prep_variant,
                              int state_variant) {
  gdn::ChunkedKnobs knobs;
  knobs.v_tile = v_tile;
  knobs.stages = stages;
  knobs.prep_variant = prep_variant;
  knobs.state_variant = state_variant;
  return gdn::Finish(
      gdn::RunPrefill(config, args, stream, gdn::cuda::PrefillKernel::kChunked, knobs));
}

int64_t gdn_prefill_workspace_bytes(void* stream) {
  gdn::Launchers& launchers = gdn::GetLaunchers();
  std::lock_guard<std::mutex> lock(launchers.mu);
  const auto it = launchers.by_stream.find(stream);
  return it == launchers.by_stream.end() ? 0
                                         : static_cast<int64_t>(it->second->workspace_bytes());
}

int gdn_decode_variant(const gdn_capi_config* config, const gdn_capi_args* args, void* stream,
                       int variant) {
  // Bit 8 (256) asks for programmatic dependent launch (gdn_capi.h).
  const bool pdl = (variant & GDN_DECODE_PDL) != 0;
  variant &= ~GDN_DECODE_PDL;
  if (!gdn::cuda::IsRecurrentVariantCode(variant)) {
    return gdn::Finish(absl::InvalidArgumentError(absl::StrCat("variant code ", variant)));
  }
  return gdn::Finish(gdn::Run(config, args, stream, gdn::kMaxDecodeTokens,
                              static_cast<gdn::cuda::RecurrentVariant>(variant), pdl));
}

int64_t gdn_page_bytes(const gdn_capi_config* config) {
  gdn::GdnOptions options;
  if (!gdn::ToOptions(config, &options).ok()) return 0;
  return static_cast<int64_t>(
      gdn::StatePageLayout::For(options.shape, options.state_dtype).page_bytes);
}

const char* gdn_last_error(void) { return gdn::g_last_error.c_str(); }

}  // extern "C"
