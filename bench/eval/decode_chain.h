// A batch of B equal-length sequences run through the backend the way the
// server decodes: n Decode calls of one token per sequence, each sequence's
// state updated in place in its page. Inputs are staged once, step-major
// ([n, B] rows), so a timed step is only the Decode call (+ Synchronize).
//
// Used for: the decode entry of the correctness grid, the long decode chains
// of the stability section (error against the oracle over steps), and the
// "recurrent" side of the chunked-vs-recurrent baseline.
#ifndef GDN_BENCH_EVAL_DECODE_CHAIN_H_
#define GDN_BENCH_EVAL_DECODE_CHAIN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/gdn_params.h"
#include "kernels/oracle/gdn_oracle.h"
#include "kernels/testing/backend_runner.h"

namespace gdn::eval {

class DecodeChain {
 public:
  // `inputs`: B sequences of the same length n (oracle layout, sequence-major),
  // direct or fused gating. Initial states as in inputs (empty: zero).
  static absl::StatusOr<std::unique_ptr<DecodeChain>> Create(
      Backend& backend, const GdnOptions& options, const oracle::Inputs& inputs);
  ~DecodeChain();
  DecodeChain(const DecodeChain&) = delete;
  DecodeChain& operator=(const DecodeChain&) = delete;

  int steps() const { return steps_; }
  int batch() const { return batch_; }

  // Issues the Decode call of step `step` (0-based, steps in order); no
  // Synchronize.
  absl::Status Step(int step);
  // Steps [0, steps()) then Synchronize.
  absl::Status RunAll();
  // o in the oracle's sequence-major layout and each sequence's final state.
  absl::StatusOr<testing::BackendOutputs> Fetch();

 private:
  DecodeChain(Backend& backend, const GdnOptions& options)
      : backend_(backend), options_(options) {}
  absl::StatusOr<void*> Upload(const void* host, size_t bytes);

  Backend& backend_;
  GdnOptions options_;
  int batch_ = 0, steps_ = 0;
  std::vector<void*> allocations_;
  std::vector<int32_t> cu_host_;  // {0, 1, ..., B}
  GdnParams base_;                // step 0's params; later steps offset rows
  const int32_t* steady_pages_ = nullptr;  // {1, ..., B}: read and write own page
  size_t qk_row_bytes_ = 0, v_row_bytes_ = 0, gate_row_floats_ = 0;
};

}  // namespace gdn::eval

#endif  // GDN_BENCH_EVAL_DECODE_CHAIN_H_
