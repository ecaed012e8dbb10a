// Runs oracle::Inputs through a Backend end to end (any backend: cpu, cuda),
// so the same test can compare every backend to the float64 oracle.
// Test-only.
//
// What a run does: allocates a state pool on the backend, writes the initial
// states into pages (converted to options.state_dtype; zero-state sequences
// get kZeroStatePage), copies inputs (converted to options.input_dtype) and
// cu_seqlens to backend memory, POISONS o and every page not holding an
// initial state with NaN, runs, synchronises, copies o and the final states
// back, frees everything. Odd sequences read one page and write another
// (copy-on-write path); even ones update their page in place. Pages that are
// no sequence's final page must come back byte-identical (catches stray
// writes). With a checkpoint interval (GdnParams::checkpoint_interval), each
// prefix state gets a page of its own after those, also poisoned, and comes
// back in checkpoint_states.
#ifndef GDN_KERNELS_TESTING_BACKEND_RUNNER_H_
#define GDN_KERNELS_TESTING_BACKEND_RUNNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"
#include "kernels/oracle/gdn_oracle.h"

namespace gdn::testing {

// What a backend produced, converted to fp32.
struct BackendOutputs {
  std::vector<float> o;                          // [T, Hv, V]
  std::vector<std::vector<float>> final_states;  // [N][Hv * K * V]
  // [N][CheckpointCount(len_i, interval)][Hv * K * V]; empty without checkpoints.
  std::vector<std::vector<std::vector<float>>> checkpoint_states;
};

enum class EntryPoint { kDecode, kPrefill };

absl::StatusOr<BackendOutputs> RunOnBackend(Backend& backend,
                                            const GdnOptions& options,
                                            const oracle::Inputs& inputs,
                                            EntryPoint entry,
                                            int32_t checkpoint_interval = 0);

// The staged form of RunOnBackend, for tests that tamper with the params
// (bad page ids, null pointers) or look at the raw pool bytes. Owns the
// backend allocations and frees them on destruction.
class StagedCall {
 public:
  static absl::StatusOr<std::unique_ptr<StagedCall>> Create(
      Backend& backend, const GdnOptions& options,
      const oracle::Inputs& inputs, int32_t checkpoint_interval = 0);
  ~StagedCall();
  StagedCall(const StagedCall&) = delete;
  StagedCall& operator=(const StagedCall&) = delete;

  // Ready-to-use params pointing at the staged buffers; editable.
  GdnParams& params() { return params_; }
  // Page-id arrays in backend memory, rewritable (e.g. to an invalid id).
  absl::Status SetPages(const std::vector<int32_t>& initial_pages,
                        const std::vector<int32_t>& final_pages);
  const std::vector<int32_t>& initial_pages() const { return initial_pages_; }
  const std::vector<int32_t>& final_pages() const { return final_pages_; }
  // Checkpoint slots [N * checkpoints_per_seq] in backend memory, rewritable.
  absl::Status SetCheckpointPages(const std::vector<int32_t>& pages);
  const std::vector<int32_t>& checkpoint_pages() const { return checkpoint_pages_; }

  // Calls backend.Decode / .Prefill with params(), then Synchronize().
  absl::Status Run(EntryPoint entry);
  // o, each sequence's final page (per final_pages()) and its checkpoint
  // pages (per checkpoint_pages(), slots of kZeroStatePage come back empty),
  // as fp32.
  absl::StatusOr<BackendOutputs> Fetch();
  // The whole pool, raw bytes.
  absl::StatusOr<std::vector<uint8_t>> PoolBytes();
  // The pool bytes right after staging (initial states + NaN poison).
  const std::vector<uint8_t>& staged_pool_bytes() const { return staged_pool_; }

 private:
  StagedCall(Backend& backend, const GdnOptions& options);
  absl::StatusOr<void*> Upload(const void* host, size_t bytes);

  Backend& backend_;
  GdnOptions options_;
  GdnParams params_;
  std::vector<int32_t> cu_seqlens_host_;
  std::vector<int32_t> initial_pages_, final_pages_, checkpoint_pages_;
  std::vector<uint8_t> staged_pool_;
  std::vector<void*> allocations_;
  int32_t* initial_pages_device_ = nullptr;
  int32_t* final_pages_device_ = nullptr;
  int32_t* checkpoint_pages_device_ = nullptr;
};

}  // namespace gdn::testing

#endif  // GDN_KERNELS_TESTING_BACKEND_RUNNER_H_
