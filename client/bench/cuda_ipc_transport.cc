#include "client/bench/cuda_ipc_transport.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gdn::client::bench {
namespace {

absl::Status CudaError(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(e), ": ",
                                          cudaGetErrorString(e)));
}

// A device allocation registered with the server as a REGION_CUDA region;
// unregistered and freed when it goes.
class CudaRegion final : public RegionTransport::Output {
 public:
  static absl::StatusOr<std::unique_ptr<CudaRegion>> Create(std::shared_ptr<grpc::Channel> channel,
                                                            const std::string& name,
                                                            size_t bytes, int device) {
    std::unique_ptr<CudaRegion> r(new CudaRegion());
    r->channel_ = std::move(channel);
    r->name_ = name;
    r->bytes_ = bytes;
    if (absl::Status s = CudaError(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
    if (absl::Status s = CudaError(cudaMalloc(&r->data_, bytes), "cudaMalloc"); !s.ok()) return s;
    cudaIpcMemHandle_t handle;
    if (absl::Status s = CudaError(cudaIpcGetMemHandle(&handle, r->data_), "cudaIpcGetMemHandle");
        !s.ok()) {
      return s;
    }
    v1::RegisterRegionRequest request;
    request.set_name(name);
    request.set_kind(v1::REGION_CUDA);
    request.set_cuda_ipc_handle(std::string(reinterpret_cast<const char*>(&handle), sizeof(handle)));
    request.set_device_id(device);
    request.set_byte_size(static_cast<int64_t>(bytes));
    if (absl::Status s = RegionTransport::Register(r->channel_, request); !s.ok()) return s;
    r->registered_ = true;
    return r;
  }
  ~CudaRegion() override {
    if (registered_) RegionTransport::Unregister(channel_, name_);
    if (data_ != nullptr) (void)cudaFree(data_);
  }
  const std::string& name() const { return name_; }
  void* data() { return data_; }
  size_t size() const { return bytes_; }

 private:
  CudaRegion() = default;
  std::shared_ptr<grpc::Channel> channel_;
  std::string name_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool registered_ = false;
};

class CudaIpcTransport final : public RegionTransport {
 public:
  CudaIpcTransport(std::shared_ptr<grpc::Channel> channel, int device)
      : channel_(std::move(channel)), device_(device) {}

  absl::Status Init(const std::vector<std::pair<const char*, size_t>>& spans) {
    const size_t total = LayOut(spans, &pools_);
    absl::StatusOr<std::unique_ptr<CudaRegion>> region =
        CudaRegion::Create(channel_, UniqueName("inputs"), total, device_);
    if (!region.ok()) return region.status();
    inputs_ = std::move(*region);
    for (const Pool& p : pools_) {
      if (absl::Status s = CudaError(cudaMemcpy(static_cast<char*>(inputs_->data()) + p.offset,
                                                p.base, p.bytes, cudaMemcpyHostToDevice),
                                     "cudaMemcpy");
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status UseRegions(wire::ForwardRequestParts* parts, std::unique_ptr<Output>* out) override {
    const size_t o_bytes = ReferencePools(pools_, inputs_->name(), parts);
    auto* o = static_cast<CudaRegion*>(out->get());
    if (o == nullptr || o->size() < o_bytes) {
      out->reset();
      absl::StatusOr<std::unique_ptr<CudaRegion>> region = CudaRegion::Create(
          channel_, UniqueName("o"), std::max<size_t>(o_bytes, 1 << 20), device_);
      if (!region.ok()) return region.status();
      o = region->get();
      *out = std::move(*region);
    }
    parts->has_o_region = true;
    parts->o_region = {o->name(), 0, static_cast<int64_t>(o_bytes)};
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  int device_;
  std::vector<Pool> pools_;
  std::unique_ptr<CudaRegion> inputs_;
};

}  // namespace

bool CudaIpcBuilt() { return true; }

absl::StatusOr<std::unique_ptr<RegionTransport>> CreateCudaIpcTransport(
    std::shared_ptr<grpc::Channel> channel,
    const std::vector<std::pair<const char*, size_t>>& pools, int device) {
  auto t = std::make_unique<CudaIpcTransport>(std::move(channel), device);
  if (absl::Status s = t->Init(pools); !s.ok()) return s;
  return std::unique_ptr<RegionTransport>(std::move(t));
}

}  // namespace gdn::client::bench
