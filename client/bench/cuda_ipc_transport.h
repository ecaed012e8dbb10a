// gdn-bench --transport=cuda_ipc (CUDA builds): Forward calls whose tensors
// stay in this process's GPU memory, shared with a gdn-server on the same
// GPU through CUDA IPC handles (REGION_CUDA). The pools are copied to the
// device once and registered; each call sends references only and names a
// device output region the server writes o into (device to device).
#ifndef GDN_CLIENT_BENCH_CUDA_IPC_TRANSPORT_H_
#define GDN_CLIENT_BENCH_CUDA_IPC_TRANSPORT_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/bench/shm_transport.h"

namespace gdn::client::bench {

// Whether this gdn-bench was built with CUDA (cuda_ipc available).
bool CudaIpcBuilt();

// Null transport and an error status when not built with CUDA.
absl::StatusOr<std::unique_ptr<RegionTransport>> CreateCudaIpcTransport(
    std::shared_ptr<grpc::Channel> channel,
    const std::vector<std::pair<const char*, size_t>>& pools, int device);

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_CUDA_IPC_TRANSPORT_H_
