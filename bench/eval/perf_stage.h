// Backend buffers for timing Prefill / Decode at sizes the oracle could never
// check (up to B = 32 x 131072 tokens): no fp32 host copy of the inputs. A
// random host tile (<= 16 MiB, values of the right kind: randn activations,
// g = logsigmoid(randn)/16, beta = sigmoid(randn), states ~ 0.5 randn) is
// uploaded once per buffer and doubled in place with CopyOnDevice until the
// buffer is full, so staging costs device-copy time, not host time.
//
// Layout: B sequences of L tokens, packed; state pool of B + 1 pages,
// sequence i in page i + 1 (page 0 unused).
#ifndef GDN_BENCH_EVAL_PERF_STAGE_H_
#define GDN_BENCH_EVAL_PERF_STAGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/gdn_params.h"

namespace gdn::eval {

class PerfStage {
 public:
  // zero_initial_state: Prefill starts every sequence from S = 0 (each run
  // then computes the same outputs: what the stability section compares);
  // else each sequence reads and writes its own page (decode in place).
  static absl::StatusOr<std::unique_ptr<PerfStage>> Create(
      Backend& backend, const GdnOptions& options, int batch, int length,
      bool zero_initial_state, uint64_t seed);
  ~PerfStage();
  PerfStage(const PerfStage&) = delete;
  PerfStage& operator=(const PerfStage&) = delete;

  const GdnParams& params() const { return params_; }
  // Backend bytes this stage holds (what it allocated).
  size_t bytes_allocated() const { return bytes_allocated_; }

  // The first min(max_bytes, all) bytes of o, as fp32 (for NaN / Inf counts
  // and run-to-run comparisons).
  absl::StatusOr<std::vector<float>> OutputSample(size_t max_bytes);

  // Bytes one call reads and writes (activations, gating, state pages) and its
  // useful FLOPs: the recurrence's ~7 K V per token per head (decay K V,
  // S^T k 2 K V, rank-1 write 2 K V, read 2 K V); a chunked kernel does more
  // arithmetic than this to reach the same result.
  static double CallBytes(const GdnOptions& options, int batch, int length,
                          bool reads_state);
  static double CallFlops(const GdnOptions& options, int batch, int length);

 private:
  PerfStage(Backend& backend, const GdnOptions& options)
      : backend_(backend), options_(options) {}
  absl::StatusOr<void*> Allocate(size_t bytes);
  // Fills `bytes` at dst by uploading `tile` then doubling with CopyOnDevice.
  absl::Status Fill(void* dst, size_t bytes, const std::vector<uint8_t>& tile);

  Backend& backend_;
  GdnOptions options_;
  GdnParams params_;
  std::vector<int32_t> cu_host_;
  std::vector<void*> allocations_;
  size_t bytes_allocated_ = 0;
};

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_PERF_STAGE_H_
