// Builds Forward requests cheaply: random inputs (shared/GDN.md: q, k, v
// ~ randn, g = logsigmoid(randn) / 16, beta = sigmoid(randn); fused gating:
// a, b ~ randn, A in [1, 16]) are encoded once into a pool of rows in the
// server's activation dtype. A call takes a window of rows of the pool
// starting at a random row (wrapping around only when the window is longer
// than the pool):
//   BuildParts: in place, the tensors are references into the pool (one run,
//     or two or more where the window wraps) for wire::EncodeForwardRequest:
//     no tensor byte is copied (the unary path);
//   Build: a v1::ForwardRequest with the rows copied in (the stream path,
//     which stays on protobuf).
// The pools are immutable and shared with every slice that references them
// (BytesRef::owner), so a request may outlive the factory.
#ifndef GDN_CLIENT_BENCH_REQUEST_FACTORY_H_
#define GDN_CLIENT_BENCH_REQUEST_FACTORY_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gdn/v1/gdn.pb.h"
#include "proto/forward_wire.h"

namespace gdn::client::bench {

struct SequenceSlot {
  std::string session_id;
  int64_t position = 0;
  int32_t num_tokens = 1;
  bool draft = false;  // a speculative draft (SequenceSpec.draft)
  int32_t checkpoint_interval = 0;  // kept states (SequenceSpec.checkpoint_interval)
};

class RequestFactory {
 public:
  // `pool_rows` rows of each tensor (calls larger than that repeat rows).
  RequestFactory(const v1::LayerConfig& config, int pool_rows, std::mt19937_64& rng);

  // A request for `sequences` on `layer`, inputs starting at a random row,
  // tensors referencing the pool.
  wire::ForwardRequestParts BuildParts(int32_t layer, const std::vector<SequenceSlot>& sequences,
                                       std::mt19937_64& rng) const;
  // The memory BuildParts' tensor runs point into (the pools), for
  // transports that place it elsewhere once (shm_transport.h).
  std::vector<std::pair<const char*, size_t>> PoolSpans() const;

  // The same request as a protobuf message (rows copied).
  v1::ForwardRequest Build(int32_t layer, const std::vector<SequenceSlot>& sequences,
                           std::mt19937_64& rng) const;

 private:
  struct Pool {
    std::string bytes;  // [pool_rows, row] in the tensor's dtype
    size_t row_bytes = 0;
    v1::DType dtype = v1::DTYPE_FP32;
    std::vector<int64_t> row_shape;  // shape of one row, e.g. [Hqk, K]
  };
  struct Pools {
    Pool q, k, v, gate_x, gate_y;  // gate x / y: g and beta, or a and b
    v1::Tensor a_log, dt_bias;     // fused gating only, [Hv] fp32
  };
  // A random first row for a window of `rows` rows.
  int64_t FirstRow(std::mt19937_64& rng, int64_t rows) const;
  // Rows [first_row, first_row + rows) of `pool` (mod pool_rows) by reference.
  wire::TensorParts TensorRows(const Pool& pool, int64_t first_row, int64_t rows) const;
  void FillTensor(const Pool& pool, int64_t first_row, int64_t rows, v1::Tensor* out) const;
  wire::TensorParts WholeTensor(const v1::Tensor& t) const;

  v1::LayerConfig config_;
  bool fused_ = false;
  int pool_rows_;
  std::shared_ptr<const Pools> pools_;
};

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_REQUEST_FACTORY_H_
