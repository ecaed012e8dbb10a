#include "kernels/cuda/decode_graph.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"

namespace gdn::cuda {
namespace {

// The pointers and sizes a graph bakes in.
bool SameBuffers(const GdnParams& a, const GdnParams& b) {
  return a.num_seqs == b.num_seqs && a.cu_seqlens == b.cu_seqlens && a.q == b.q &&
         a.k == b.k && a.v == b.v && a.o == b.o && a.g == b.g && a.beta == b.beta &&
         a.a == b.a && a.b == b.b && a.A_log == b.A_log && a.dt_bias == b.dt_bias &&
         a.initial_pages == b.initial_pages && a.final_pages == b.final_pages &&
         a.pool.base == b.pool.base && a.pool.page_bytes == b.pool.page_bytes &&
         a.pool.num_pages == b.pool.num_pages && a.pool.dtype == b.pool.dtype;
}

}  // namespace

struct DecodeGraphCache::Graph {
  GdnParams captured;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
  }
};

DecodeGraphCache::DecodeGraphCache(Backend& backend, const GdnOptions& options)
    : backend_(backend), options_(options) {}

DecodeGraphCache::~DecodeGraphCache() { (void)backend_.Synchronize(); }

void DecodeGraphCache::Clear() {
  (void)backend_.Synchronize();  // no replay in flight uses a graph we destroy
  graphs_.clear();
}

absl::StatusOr<std::unique_ptr<DecodeGraphCache>> DecodeGraphCache::Create(
    Backend& backend, const GdnOptions& options) {
  if (dynamic_cast<CudaBackend*>(&backend) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("DecodeGraphCache needs the cuda backend, got ", backend.name()));
  }
  if (absl::Status s = backend.Supports(options); !s.ok()) return s;
  return std::unique_ptr<DecodeGraphCache>(new DecodeGraphCache(backend, options));
}

absl::StatusOr<std::unique_ptr<DecodeGraphCache::Graph>> DecodeGraphCache::Capture(
    const GdnParams& params) {
  cudaStream_t stream = static_cast<CudaBackend&>(backend_).stream();
  auto graph = std::make_unique<Graph>();
  graph->captured = params;
  GDN_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status decode = backend_.Decode(options_, params);
  const cudaError_t end = cudaStreamEndCapture(stream, &graph->graph);
  if (!decode.ok()) return decode;
  GDN_CUDA_RETURN_IF_ERROR(end);
  GDN_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&graph->exec, graph->graph, 0));
  return graph;
}

absl::Status DecodeGraphCache::Run(const GdnParams& params) {
  if (absl::Status s = ValidateParams(options_, params, kMaxDecodeTokens); !s.ok()) return s;
  auto it = graphs_.find(params.num_seqs);
  if (it == graphs_.end()) {
    absl::StatusOr<std::unique_ptr<Graph>> graph = Capture(params);
    if (!graph.ok()) return graph.status();
    it = graphs_.emplace(params.num_seqs, *std::move(graph)).first;
  } else if (!SameBuffers(it->second->captured, params)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "decode graph of bucket ", params.num_seqs,
        " was captured with other staging buffers; reuse the same ones"));
  }
  GDN_CUDA_RETURN_IF_ERROR(
      cudaGraphLaunch(it->second->exec, static_cast<CudaBackend&>(backend_).stream()));
  return absl::OkStatus();
}

}  // namespace gdn::cuda
