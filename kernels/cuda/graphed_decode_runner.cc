#include "kernels/cuda/graphed_decode_runner.h"

#include <memory>
#include <utility>

#include "kernels/cuda/decode_graph.h"

namespace gdn::cuda {
namespace {

// The pointers a graph bakes in, apart from the bucket (num_seqs): all
// buckets share one set of staging buffers.
bool SameStaging(const GdnParams& a, const GdnParams& b) {
  return a.cu_seqlens == b.cu_seqlens && a.q == b.q && a.k == b.k && a.v == b.v &&
         a.o == b.o && a.g == b.g && a.beta == b.beta && a.a == b.a && a.b == b.b &&
         a.A_log == b.A_log && a.dt_bias == b.dt_bias &&
         a.initial_pages == b.initial_pages && a.final_pages == b.final_pages &&
         a.pool.base == b.pool.base && a.pool.page_bytes == b.pool.page_bytes &&
         a.pool.num_pages == b.pool.num_pages && a.pool.dtype == b.pool.dtype;
}

class GraphedDecodeRunner final : public DecodeRunner {
 public:
  GraphedDecodeRunner(Backend& backend, const GdnOptions& options, int32_t max_seqs,
                      std::unique_ptr<DecodeGraphCache> cache)
      : backend_(backend), options_(options), max_seqs_(max_seqs), cache_(std::move(cache)) {}

  int32_t PaddedSeqs(int32_t num_seqs) const override {
    return DecodeBucket(num_seqs, max_seqs_);
  }

  absl::Status Run(const GdnParams& params) override {
    if (params.num_seqs > max_seqs_ || DecodeBucket(params.num_seqs, max_seqs_) != params.num_seqs) {
      ++stats_.direct_runs;
      return backend_.Decode(options_, params);
    }
    if (has_last_ && !SameStaging(last_, params)) cache_->Clear();
    last_ = params;
    has_last_ = true;
    const bool captured = cache_->has_graph(params.num_seqs);
    // A capture (rare: first batch of a bucket) starts from an idle stream,
    // so nothing queued before it (the staging uploads) is in flight while
    // the stream is in capture mode.
    if (!captured) {
      if (absl::Status s = backend_.Synchronize(); !s.ok()) return s;
    }
    if (absl::Status s = cache_->Run(params); !s.ok()) return s;
    if (captured) {
      ++stats_.graph_replays;
    } else {
      ++stats_.graph_captures;
      ++stats_.graph_replays;  // a capture is followed by its first replay
    }
    return absl::OkStatus();
  }

  bool graphed() const override { return true; }
  DecodeRunnerStats stats() const override { return stats_; }

 private:
  Backend& backend_;
  GdnOptions options_;
  int32_t max_seqs_;
  std::unique_ptr<DecodeGraphCache> cache_;
  GdnParams last_;
  bool has_last_ = false;
  DecodeRunnerStats stats_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DecodeRunner>> CreateGraphedDecodeRunner(
    Backend& backend, const GdnOptions& options, int32_t max_seqs) {
  if (max_seqs < 1) return absl::InvalidArgumentError("decode runner: max_seqs must be >= 1");
  absl::StatusOr<std::unique_ptr<DecodeGraphCache>> cache =
      DecodeGraphCache::Create(backend, options);
  if (!cache.ok()) return cache.status();
  return std::unique_ptr<DecodeRunner>(
      new GraphedDecodeRunner(backend, options, max_seqs, *std::move(cache)));
}

}  // namespace gdn::cuda
