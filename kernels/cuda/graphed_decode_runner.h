// The graphed DecodeRunner (kernels/decode_runner.h) of the cuda backend:
// batches padded to a bucket run as replays of per-bucket CUDA graphs
// (DecodeGraphCache). Host header without CUDA includes (the factory in
// kernels/decode_runner.cc includes it).
//
// Threading: as Backend (the engine thread that owns the backend).
#ifndef GDN_KERNELS_CUDA_GRAPHED_DECODE_RUNNER_H_
#define GDN_KERNELS_CUDA_GRAPHED_DECODE_RUNNER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/decode_runner.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda {

// `backend` must be the cuda backend (InvalidArgument otherwise) and outlive
// the runner. Buckets: DecodeBucket(n, max_seqs); a batch of more than
// max_seqs sequences (or a params.num_seqs that is not a bucket) runs
// directly through Backend::Decode.
absl::StatusOr<std::unique_ptr<DecodeRunner>> CreateGraphedDecodeRunner(
    Backend& backend, const GdnOptions& options, int32_t max_seqs);

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_GRAPHED_DECODE_RUNNER_H_
