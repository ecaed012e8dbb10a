#include "kernels/cpu/recurrence_kernel.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/dtype_convert.h"
#include "kernels/gating.h"
#include "kernels/state_page_codec.h"
#include "kernels/state_quant.h"

namespace gdn::cpu {
namespace {

constexpr int kMaxDim = 128;  // largest K and V
// Tokens whose q, k, v and gates are prepared together (fp32, normalised)
// before the slabs run them; also the o rows written back together.
constexpr int kBlock = 16;
static_assert(kCheckpointTokens % kBlock == 0, "checkpoints end token blocks");
static_assert(kColumnTile % kStateScaleCols == 0, "slabs hold whole scale groups");

// int8 / fp8 pages, scalar (state_page_codec.h): a slab [K][16] per 16
// columns, columns [v0, v1) of head `head`.
void LoadQuantizedSlabs(const GdnOptions& options, const void* page, int head, int v0, int v1,
                        float* slabs) {
  const StatePageFormat format = StatePageFormat::For(options);
  for (int j0 = v0; j0 < v1; j0 += kColumnTile) {
    DecodeStateColumns(format, page, head, j0, kColumnTile,
                       slabs + (j0 - v0) * options.shape.head_dim_k, kColumnTile);
  }
}
void StoreQuantizedSlabs(const GdnOptions& options, const float* slabs, int head, int v0, int v1,
                         uint32_t salt, void* page) {
  const StatePageFormat format = StatePageFormat::For(options);
  for (int j0 = v0; j0 < v1; j0 += kColumnTile) {
    EncodeStateColumns(format, head, j0, kColumnTile,
                       slabs + (j0 - v0) * options.shape.head_dim_k, kColumnTile, salt, page);
  }
}

// The stochastic-rounding salt of a state stored after token t, at head h
// (state_quant.h RoundingSalt: the raw gates of that token).
uint32_t StoreSalt(const GdnOptions& options, const GdnParams& p, int64_t t, int h) {
  const size_t at = static_cast<size_t>(t) * options.shape.num_v_heads + h;
  return options.gating == GatingMode::kDirect ? quant::RoundingSalt(p.g[at], p.beta[at])
                                               : quant::RoundingSalt(p.a[at], p.b[at]);
}

#if defined(__x86_64__)
namespace avx2 {
#define GDN_KERNEL_FN inline __attribute__((always_inline, target("avx2,fma")))
#include "kernels/cpu/recurrence_kernel_body.inc"
#undef GDN_KERNEL_FN
}  // namespace avx2
#endif

namespace generic {
#define GDN_KERNEL_FN inline __attribute__((always_inline))
#include "kernels/cpu/recurrence_kernel_body.inc"
#undef GDN_KERNEL_FN
}  // namespace generic

using HeadFn = void (*)(const GdnOptions&, const GdnParams&, const HeadTask&,
                        float*);

template <int K, int V>
void RunHeadGeneric(const GdnOptions& options, const GdnParams& p,
                    const HeadTask& task, float* scratch) {
  generic::RunHeadImpl<K, V>(options, p, task, scratch);
}

#if defined(__x86_64__)
// The same code compiled for AVX2 + FMA, picked at run time (CI machines
// without AVX2 take the generic path; no -march flags needed).
template <int K, int V>
__attribute__((target("avx2,fma"))) void RunHeadAvx2(
    const GdnOptions& options, const GdnParams& p, const HeadTask& task,
    float* scratch) {
  avx2::RunHeadImpl<K, V>(options, p, task, scratch);
}

bool HaveAvx2Fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
bool HaveAvx2Fma() { return false; }
#endif

std::atomic<bool> allow_avx2{true};

bool UseAvx2() {
  static const bool have = HaveAvx2Fma();
  return have && allow_avx2.load(std::memory_order_relaxed);
}

template <int K, int V>
HeadFn PickIsa() {
#if defined(__x86_64__)
  if (UseAvx2()) return &RunHeadAvx2<K, V>;
#endif
  return &RunHeadGeneric<K, V>;
}

HeadFn PickHeadFn(int k, int v) {
  if (k == 64) return v == 64 ? PickIsa<64, 64>() : PickIsa<64, 128>();
  return v == 64 ? PickIsa<128, 64>() : PickIsa<128, 128>();
}

}  // namespace

size_t ScratchFloats() {
  return kMaxDim * kMaxDim + 4 * kBlock * kMaxDim + 3 * kBlock;
}

void RunHead(const GdnOptions& options, const GdnParams& params,
             const HeadTask& task, float* scratch) {
  PickHeadFn(options.shape.head_dim_k, options.shape.head_dim_v)(
      options, params, task, scratch);
}

const char* KernelIsa() { return UseAvx2() ? "avx2+fma" : "generic"; }

void AllowAvx2ForTesting(bool allow) { allow_avx2.store(allow); }

}  // namespace gdn::cpu
