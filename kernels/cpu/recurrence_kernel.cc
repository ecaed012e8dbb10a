#include "kernels/cpu/recurrence_kernel.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/dtype_convert.h"
#include "kernels/gating.h"

namespace gdn::cpu {
namespace {

constexpr int kMaxDim = 128;  // largest K and V
// Tokens whose q, k, v and gates are prepared together (fp32, normalised)
// before the slabs run them; also the o rows written back together.
constexpr int kBlock = 16;
static_assert(kCheckpointTokens % kBlock == 0, "checkpoints end token blocks");

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
