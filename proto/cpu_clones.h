// GDN_CPU_CLONES: a hot host loop built for several x86-64 levels, the one
// the CPU supports picked when the program loads (GCC's target_clones, an
// ifunc). Debian builds for baseline x86-64 (SSE2); the value scans of every
// Forward request (wire::FirstNonFinite, the gate range check) then move
// ~35 GB/s, against ~140 GB/s with AVX-512 (128 KiB of bf16 in 3.8 vs
// 0.9 us, on the 2-core VM). Only for loops whose results cannot depend on
// the instruction set: integer and comparison work, never float arithmetic
// (FMA contraction would change rounding between machines).
#ifndef GDN_PROTO_CPU_CLONES_H_
#define GDN_PROTO_CPU_CLONES_H_

#include <cstddef>
#include <type_traits>

// Not under ThreadSanitizer or AddressSanitizer (scripts/test.sh
// --sanitize=...): the ifunc resolvers run before the sanitizer's runtime is
// up, and a TSan build then crashes at load (seen with GCC 12).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define GDN_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GDN_CPU_CLONES
#endif

namespace gdn {

// The block walk of those scans: skips the blocks that
// block_clean(start, std::integral_constant<size_t, N>) says are clean,
// kLarge elements at a time, then kSmall, and returns where the caller's
// element-by-element loop starts (the first block that may hold a bad
// element, or the last < kSmall elements). block_clean's loop has a constant
// trip count, which GCC's -O2 vectoriser needs; inlined into a GDN_CPU_CLONES
// caller, it is built for each level. The small blocks matter: a request's
// payload arrives as gRPC slices of any length, and an element-by-element
// tail of up to 4095 bf16 values was 17x slower per element than a block.
template <size_t kLarge, size_t kSmall, typename BlockClean>
__attribute__((always_inline)) inline size_t SkipCleanBlocks(size_t n, BlockClean&& block_clean) {
  size_t start = 0;
  while (start + kLarge <= n && block_clean(start, std::integral_constant<size_t, kLarge>{})) {
    start += kLarge;
  }
  while (start + kSmall <= n && block_clean(start, std::integral_constant<size_t, kSmall>{})) {
    start += kSmall;
  }
  return start;
}

}  // namespace gdn

#endif  // GDN_PROTO_CPU_CLONES_H_
