// DecodeRunner: how the server runs one decode batch on its backend, behind
// one interface so the engine has no #ifdef for CUDA.
//
//   direct (cpu, or cuda with graphs off): Backend::Decode, batch as is.
//   graphed (cuda): the batch is padded to a bucket of num_seqs (powers of
//     two up to max_seqs; DecodeBucket) and replayed as a CUDA graph captured
//     once per bucket (kernels/cuda/decode_graph.h): one launch whatever the
//     batch's kernel needs, no per-call host dispatch.
//
// Padding (AppendDecodePadding): sequences [num_seqs, bucket) get one token
// each (the caller zeroes its inputs), initial page kZeroStatePage and final
// page kDiscardPage, an id outside every pool: the kernels never read or
// write a page for them (LaunchRecurrent's contract for out-of-range ids;
// their o rows become NaN, and the caller drops them). So padding needs no
// reserved scratch page and can never write a session's page.
//
// A graphed runner bakes the params' pointers into each bucket's graph:
// keep the staging buffers fixed between calls. When any pointer changes
// (staging grew), every bucket is captured again (counted in stats()).
//
// Threading: as Backend (the engine thread that owns the backend).
#ifndef GDN_KERNELS_DECODE_RUNNER_H_
#define GDN_KERNELS_DECODE_RUNNER_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn {

// Final page of padding sequences: outside [0, num_pages) of any pool.
inline constexpr int32_t kDiscardPage = std::numeric_limits<int32_t>::max();

struct DecodeRunnerConfig {
  // cuda only: run decode batches through per-bucket CUDA graphs. The cpu
  // backend always runs directly.
  bool use_graphs = true;
  // The largest bucket: batches of up to max_seqs sequences are padded and
  // graphed; larger ones (if any) run directly.
  int32_t max_seqs = 8192;
};

// Monotone counters since creation.
struct DecodeRunnerStats {
  uint64_t graph_captures = 0;  // graphs captured (first use of a bucket, or staging moved)
  uint64_t graph_replays = 0;   // batches run as a graph launch (a capture launches too)
  uint64_t direct_runs = 0;     // batches run with Backend::Decode
};

// The bucket a batch of num_seqs sequences runs as: the next power of two,
// capped at max_seqs (itself a bucket even when not a power of two);
// num_seqs itself when num_seqs > max_seqs or num_seqs < 1.
inline int32_t DecodeBucket(int32_t num_seqs, int32_t max_seqs) {
  if (num_seqs < 1 || num_seqs > max_seqs) return num_seqs;
  int64_t bucket = 1;
  while (bucket < num_seqs) bucket *= 2;
  return static_cast<int32_t>(bucket < max_seqs ? bucket : max_seqs);
}

// Every bucket up to max_seqs, ascending: 1, 2, 4, ..., max_seqs.
inline std::vector<int32_t> DecodeBuckets(int32_t max_seqs) {
  std::vector<int32_t> buckets;
  for (int64_t b = 1; b < max_seqs; b *= 2) buckets.push_back(static_cast<int32_t>(b));
  if (max_seqs >= 1) buckets.push_back(max_seqs);
  return buckets;
}

// Appends padding sequences num_seqs .. padded_seqs - 1 to host metadata
// whose first num_seqs entries (and cu_seqlens[0..num_seqs]) are filled:
// one token each, initial page kZeroStatePage, final page `pad_page`.
// cu_seqlens holds padded_seqs + 1 entries, the page arrays padded_seqs.
// Returns the padded token count cu_seqlens[max(num_seqs, padded_seqs)].
inline int32_t AppendDecodePadding(int32_t num_seqs, int32_t padded_seqs, int32_t pad_page,
                                   int32_t* cu_seqlens, int32_t* initial_pages,
                                   int32_t* final_pages) {
  for (int32_t i = num_seqs; i < padded_seqs; ++i) {
    cu_seqlens[i + 1] = cu_seqlens[i] + 1;
    initial_pages[i] = kZeroStatePage;
    final_pages[i] = pad_page;
  }
  return cu_seqlens[padded_seqs > num_seqs ? padded_seqs : num_seqs];
}

class DecodeRunner {
 public:
  virtual ~DecodeRunner() = default;

  // How many sequences a batch of num_seqs must be run as: params.num_seqs
  // of Run (num_seqs itself when not graphed).
  virtual int32_t PaddedSeqs(int32_t num_seqs) const = 0;
  // Runs one decode call (params.num_seqs == PaddedSeqs(real sequences),
  // padding already staged). Asynchronous on the backend's stream, as
  // Backend::Decode.
  virtual absl::Status Run(const GdnParams& params) = 0;
  virtual bool graphed() const = 0;
  virtual DecodeRunnerStats stats() const = 0;
};

// Graphed when config.use_graphs and the backend is the cuda backend (and
// this binary has it); direct otherwise. `options` are those of every Run.
absl::StatusOr<std::unique_ptr<DecodeRunner>> CreateDecodeRunner(
    Backend& backend, const GdnOptions& options, const DecodeRunnerConfig& config);

// The direct runner alone (tests, and the fallback of CreateDecodeRunner).
std::unique_ptr<DecodeRunner> CreateDirectDecodeRunner(Backend& backend,
                                                       const GdnOptions& options);

}  // namespace gdn

#endif  // GDN_KERNELS_DECODE_RUNNER_H_
