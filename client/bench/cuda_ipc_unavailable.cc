// CreateCudaIpcTransport in builds without CUDA: --transport=cuda_ipc is
// refused with a clear error.
#include "client/bench/cuda_ipc_transport.h"

namespace gdn::client::bench {

bool CudaIpcBuilt() { return false; }

absl::StatusOr<std::unique_ptr<RegionTransport>> CreateCudaIpcTransport(
    std::shared_ptr<grpc::Channel>, const std::vector<std::pair<const char*, size_t>>&, int) {
  return absl::FailedPreconditionError(
      "--transport=cuda_ipc needs a gdn-bench built with CUDA (GDN_WITH_CUDA)");
}

}  // namespace gdn::client::bench
