#include "bench/echo/min_client_request.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/gdn_types.h"
#include "proto/forward_wire.h"
#include "proto/tensor_codec.h"

namespace gdn::echo {
namespace {

// `bytes` of zeros that live as long as the process (static slices need no
// owner). Grows by leaking the smaller buffer: a min client asks once.
const char* StaticZeros(size_t bytes) {
  static std::vector<char>* zeros = nullptr;
  if (zeros == nullptr || zeros->size() < bytes) {
    zeros = new std::vector<char>(bytes);  // value-initialised: written, so touched
  }
  return zeros->data();
}

wire::TensorParts Zeros(v1::DType dtype, std::vector<int64_t> shape, size_t elem_bytes) {
  wire::TensorParts t;
  t.dtype = dtype;
  size_t bytes = elem_bytes;
  for (int64_t d : shape) bytes *= static_cast<size_t>(d);
  t.shape = std::move(shape);
  t.data.push_back({StaticZeros(bytes), bytes, nullptr});
  return t;
}

}  // namespace

int64_t ExpectedOutputBytes(const v1::LayerConfig& c, const MinRequestShape& shape) {
  DType act = DType::kBF16;
  wire::FromProtoDType(c.activation_dtype(), &act);
  return int64_t{shape.sessions} * shape.tokens * c.num_v_heads() * c.head_dim_v() *
         static_cast<int64_t>(DTypeSize(act));
}

absl::StatusOr<grpc::ByteBuffer> BuildMinRequest(const v1::LayerConfig& c,
                                                 const MinRequestShape& shape) {
  if (shape.sessions < 1 || shape.tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sessions and --tokens must be >= 1, got ", shape.sessions, " and ",
                     shape.tokens));
  }
  DType act;
  if (!wire::FromProtoDType(c.activation_dtype(), &act)) {
    return absl::InvalidArgumentError("the server reports no activation dtype");
  }
  const int64_t t = int64_t{shape.sessions} * shape.tokens;
  const int64_t hqk = c.num_qk_heads(), hv = c.num_v_heads();
  // The largest payload first, so one buffer serves every tensor.
  StaticZeros(static_cast<size_t>(t) * std::max(hqk * c.head_dim_k(), hv * c.head_dim_v()) *
              DTypeSize(act));
  wire::ForwardRequestParts parts;
  parts.layer = shape.layer;
  for (int i = 0; i < shape.sessions; ++i) {
    parts.sequences.push_back({absl::StrCat("min-", i), 0, shape.tokens});
  }
  parts.q = Zeros(c.activation_dtype(), {t, hqk, c.head_dim_k()}, DTypeSize(act));
  parts.k = Zeros(c.activation_dtype(), {t, hqk, c.head_dim_k()}, DTypeSize(act));
  parts.v = Zeros(c.activation_dtype(), {t, hv, c.head_dim_v()}, DTypeSize(act));
  parts.g = Zeros(v1::DTYPE_FP32, {t, hv}, sizeof(float));
  parts.beta = Zeros(v1::DTYPE_FP32, {t, hv}, sizeof(float));
  return wire::EncodeForwardRequest(parts);
}

}  // namespace gdn::echo
