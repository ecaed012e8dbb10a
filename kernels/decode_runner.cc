// DecodeRunner: the direct runner and the factory
// (the graphed runner is kernels/cuda/graphed_decode_runner.cc).
#include "kernels/decode_runner.h"

#include <memory>
#include <utility>

#ifdef GDN_HAVE_CUDA_BACKEND
#include "kernels/cuda/graphed_decode_runner.h"
#endif

namespace gdn {

namespace {

class DirectDecodeRunner final : public DecodeRunner {
 public:
  DirectDecodeRunner(Backend& backend, const GdnOptions& options)
      : backend_(backend), options_(options) {}

  int32_t PaddedSeqs(int32_t num_seqs) const override { return num_seqs; }
  absl::Status Run(const GdnParams& params) override {
    ++stats_.direct_runs;
    return backend_.Decode(options_, params);
  }
  bool graphed() const override { return false; }
  DecodeRunnerStats stats() const override { return stats_; }

 private:
  Backend& backend_;
  GdnOptions options_;
  DecodeRunnerStats stats_;
};

}  // namespace

std::unique_ptr<DecodeRunner> CreateDirectDecodeRunner(Backend& backend,
                                                       const GdnOptions& options) {
  return std::make_unique<DirectDecodeRunner>(backend, options);
}

absl::StatusOr<std::unique_ptr<DecodeRunner>> CreateDecodeRunner(
    Backend& backend, const GdnOptions& options, const DecodeRunnerConfig& config) {
  if (config.max_seqs < 1) {
    return absl::InvalidArgumentError("decode runner: max_seqs must be >= 1");
  }
#ifdef GDN_HAVE_CUDA_BACKEND
  if (config.use_graphs && backend.name() == "cuda") {
    return cuda::CreateGraphedDecodeRunner(backend, options, config.max_seqs);
  }
#endif
  return CreateDirectDecodeRunner(backend, options);
}

}  // namespace gdn
