// Hardware ceilings measured in the same run as the operator timings (seed
// 000: read achieved bandwidth and FLOP/s against what this machine does):
//   - copy bandwidth through the backend's CopyOnDevice (cpu: memmove of host
//     memory; cuda: device-to-device copy), bytes read + written per second;
//   - fp32 FMA throughput of a simple vectorised multiply-add loop on every
//     hardware thread (cpu only; the GPU's is not measured here).
#ifndef GDN_BENCH_EVAL_CEILINGS_H_
#define GDN_BENCH_EVAL_CEILINGS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace gdn::eval {

struct CopyCeiling {
  int64_t bytes = 0;  // per copy (read once, written once)
  int runs = 0;
  double seconds_p50 = 0;
  double bytes_per_s = 0;  // 2 * bytes / median time
};
// ResourceExhausted when the two buffers do not fit.
absl::StatusOr<CopyCeiling> MeasureCopyCeiling(Backend& backend, int64_t bytes, int runs);

struct FmaCeiling {
  int threads = 0;
  bool avx2_fma = false;  // which loop ran
  double flops_per_s = 0;
};
// Runs for about `seconds` on `threads` threads (0: all hardware threads).
FmaCeiling MeasureCpuFmaCeiling(int threads, double seconds);

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_CEILINGS_H_
