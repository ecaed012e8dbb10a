// CUDA graphs for decode: one captured graph per batch-size bucket, replayed
// for every later batch of that bucket. A decode call is one small kernel
// whose launch overhead is a large share of batch-1 time; a graph replay
// makes that cost (and any staging copies captured with it) one launch.
//
// How the server uses it (through kernels/cuda/graphed_decode_runner.h):
//   1. Per bucket B (e.g. 1, 2, 4, 8, 16, ... 1024 sequences) allocate fixed
//      staging buffers once: q/k/v/o/gating for B * kMaxDecodeTokens tokens,
//      cu_seqlens [B + 1], initial/final page ids [B] (device), and a pinned
//      host mirror. Fill a GdnParams pointing at them, num_seqs = B.
//   2. Per batch: pad the batch to its bucket (pad sequences: 1 token,
//      initial page kZeroStatePage, final page kDiscardPage, an id outside
//      the pool, so no page is written for them), write the host mirror,
//      CopyToDevice into the staging buffers,
//      then DecodeGraphCache::Run(params). The first Run of a bucket captures
//      Backend::Decode into a graph; later Runs replay it. The graph reads the
//      staging buffers' *contents* at replay time (token counts, page ids and
//      activations may change freely); the *pointers* and num_seqs may not:
//      Run checks they equal the captured ones (FailedPrecondition if not).
//   3. Copy o back from the staging o buffer.
//
// Threading: as Backend (the engine thread that owns the backend).
#ifndef GDN_KERNELS_CUDA_DECODE_GRAPH_H_
#define GDN_KERNELS_CUDA_DECODE_GRAPH_H_

#include <map>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"

namespace gdn::cuda {

class DecodeGraphCache {
 public:
  // `backend` must be the cuda backend (InvalidArgument otherwise) and outlive
  // the cache. All graphs use `options`.
  static absl::StatusOr<std::unique_ptr<DecodeGraphCache>> Create(Backend& backend,
                                                                  const GdnOptions& options);
  ~DecodeGraphCache();
  DecodeGraphCache(const DecodeGraphCache&) = delete;
  DecodeGraphCache& operator=(const DecodeGraphCache&) = delete;

  // Validates `params` on the host (as Decode does), then replays the graph
  // of bucket params.num_seqs on the backend's stream, capturing it first if
  // this bucket has none. Asynchronous like Backend::Decode.
  absl::Status Run(const GdnParams& params);

  int num_graphs() const { return static_cast<int>(graphs_.size()); }
  bool has_graph(int32_t num_seqs) const { return graphs_.count(num_seqs) != 0; }
  // Drops every captured graph (after the staging buffers moved); the next
  // Run of each bucket captures again. Waits for the backend's stream.
  void Clear();

 private:
  struct Graph;
  DecodeGraphCache(Backend& backend, const GdnOptions& options);
  absl::StatusOr<std::unique_ptr<Graph>> Capture(const GdnParams& params);

  Backend& backend_;
  GdnOptions options_;
  std::map<int32_t, std::unique_ptr<Graph>> graphs_;  // by num_seqs
};

}  // namespace gdn::cuda

#endif  // GDN_KERNELS_CUDA_DECODE_GRAPH_H_
