// Builds Forward requests cheaply: random inputs (shared/GDN.md: q, k, v
// ~ randn, g = logsigmoid(randn) / 16, beta = sigmoid(randn); fused gating:
// a, b ~ randn, A in [1, 16]) are encoded once into a pool of rows in the
// server's activation dtype, and each call copies a window of rows out of it
// (wrapping around), so the client spends its time on the network rather
// than on random numbers and dtype conversion.
#ifndef GDN_CLIENT_BENCH_REQUEST_FACTORY_H_
#define GDN_CLIENT_BENCH_REQUEST_FACTORY_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gdn/v1/gdn.pb.h"

namespace gdn::client::bench {

struct SequenceSlot {
  std::string session_id;
  int64_t position = 0;
  int32_t num_tokens = 1;
};

class RequestFactory {
 public:
  // `pool_rows` rows of each tensor (calls larger than that repeat rows).
  RequestFactory(const v1::LayerConfig& config, int pool_rows, std::mt19937_64& rng);

  // A request for `sequences` on `layer`, inputs starting at a random row.
  v1::ForwardRequest Build(int32_t layer, const std::vector<SequenceSlot>& sequences,
                           std::mt19937_64& rng) const;

 private:
  struct Pool {
    std::string bytes;  // [pool_rows, row] in the tensor's dtype
    size_t row_bytes = 0;
    v1::DType dtype = v1::DTYPE_FP32;
    std::vector<int64_t> row_shape;  // shape of one row, e.g. [Hqk, K]
  };
  void FillTensor(const Pool& pool, int64_t first_row, int64_t rows, v1::Tensor* out) const;

  v1::LayerConfig config_;
  int pool_rows_;
  Pool q_, k_, v_, gate_x_, gate_y_;  // gate x / y: g and beta, or a and b
  v1::Tensor a_log_, dt_bias_;        // fused gating only, [Hv] fp32
};

}  // namespace gdn::client::bench

#endif  // GDN_CLIENT_BENCH_REQUEST_FACTORY_H_
