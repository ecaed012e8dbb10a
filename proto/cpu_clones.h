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

#endif  // GDN_PROTO_CPU_CLONES_H_
