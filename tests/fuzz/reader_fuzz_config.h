// The server configuration forward_request_reader_fuzz.cc reads requests
// for, shared with the corpus generator (make_corpus.cc) so that its seeds
// are valid requests for it. Small heads and head dims keep a valid
// request of a few tokens under libFuzzer's default 4 KB inputs.
//
// Input of the target: one selector byte, then the ForwardRequest bytes.
//   bit 0     gating: 0 direct (g, beta), 1 fused (a, b, a_log, dt_bias)
//   bits 1-2  activation dtype: 0 bf16, 1 fp16, 2 fp32, 3 bf16
//   bits 3-7  0: the message in one slice; s > 0: slices of s bytes, so
//             elements straddle slice boundaries
#ifndef GDN_TESTS_FUZZ_READER_FUZZ_CONFIG_H_
#define GDN_TESTS_FUZZ_READER_FUZZ_CONFIG_H_

#include <cstdint>

#include "kernels/gdn_types.h"

namespace gdn::fuzz {

inline constexpr int kReaderLayers = 3;
// A SYSTEM region the target registers: its first half is zeros (valid for
// every input: g = 0, beta = 0), its second half 0xff bytes (NaN in every
// dtype), so references to either half are interesting.
inline constexpr char kRegionName[] = "r";
inline constexpr int64_t kRegionBytes = 64 << 10;

inline GdnOptions ReaderOptions(uint8_t selector) {
  GdnOptions o;
  o.shape.num_qk_heads = 1;
  o.shape.num_v_heads = 2;
  o.shape.head_dim_k = 8;
  o.shape.head_dim_v = 8;
  o.gating = (selector & 1) ? GatingMode::kFused : GatingMode::kDirect;
  static constexpr DType kDTypes[] = {DType::kBF16, DType::kF16, DType::kF32, DType::kBF16};
  o.input_dtype = kDTypes[(selector >> 1) & 3];
  return o;
}

inline int SliceBytes(uint8_t selector) { return selector >> 3; }

}  // namespace gdn::fuzz

#endif  // GDN_TESTS_FUZZ_READER_FUZZ_CONFIG_H_
