// The wire codec: gdn.v1 Tensor messages <-> the operator's dtypes and host
// fp32 values. Shared by the server (validation, staging) and the client
// library (building requests, reading o).
//
// A wire Tensor is dense, row-major, little-endian raw elements of `dtype`;
// `data` holds exactly prod(shape) * DTypeSize(dtype) bytes. Pure functions,
// safe from any thread.
#ifndef GDN_PROTO_TENSOR_CODEC_H_
#define GDN_PROTO_TENSOR_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gdn/v1/gdn.pb.h"
#include "kernels/gdn_types.h"

namespace gdn::wire {

// DType <-> gdn.v1.DType. FromProtoDType rejects DTYPE_UNSPECIFIED and
// unknown values (returns false, *out untouched).
bool ToProtoDType(DType d, gdn::v1::DType* out);
bool FromProtoDType(gdn::v1::DType p, DType* out);

// Elements of a shape (1 for the empty shape, a scalar); -1 when a dimension
// is negative or the product overflows int64.
int64_t NumElements(const std::vector<int64_t>& shape);

// A wire tensor of `dtype` and `shape` from fp32 `values` (prod(shape) of
// them, each rounded once to `dtype`, round to nearest even).
gdn::v1::Tensor MakeTensor(DType dtype, std::vector<int64_t> shape,
                           const float* values);
// A wire tensor whose data are the prod(shape) * DTypeSize(dtype) raw bytes
// at `bytes` (already in `dtype`).
gdn::v1::Tensor MakeTensorRaw(DType dtype, std::vector<int64_t> shape,
                              const void* bytes);

// A tensor's header as it came: a gdn.v1.Tensor's, or a scanned one's
// (forward_wire.h) whose data bytes were not read.
struct TensorHeader {
  gdn::v1::DType dtype = gdn::v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  uint64_t data_bytes = 0;
};

// OK when the tensor has exactly `dtype`, exactly `shape` and a data size of
// prod(shape) * DTypeSize(dtype) bytes; otherwise InvalidArgument naming
// `field`, what was expected and what came, e.g.
//   "q: expected shape [3, 2, 64] (bf16), got [3, 2, 32]"
//   "q: missing, expected [3, 2, 64] (bf16)".
absl::Status CheckTensorHeader(const TensorHeader& t, absl::string_view field, DType dtype,
                               const std::vector<int64_t>& shape);
absl::Status CheckTensor(const gdn::v1::Tensor& t, absl::string_view field,
                         DType dtype, const std::vector<int64_t>& shape);

// The index of the first of n elements of `dtype` at `data` that is NaN or
// +-Inf, or n. Vectorised: it runs over every activation of every request.
size_t FirstNonFinite(const void* data, size_t n, DType dtype);
// InvalidArgument "q: element 17 is nan; every value must be finite".
absl::Status NonFiniteError(absl::string_view field, const void* data, DType dtype,
                            size_t index);

// InvalidArgument naming `field` and the first non-finite element's flat index
// (and its value) when any element is NaN or +-Inf; OK otherwise. Requires a
// tensor that passed CheckTensor (or at least a known dtype and whole
// elements; a bad dtype is InvalidArgument too).
absl::Status CheckFinite(const gdn::v1::Tensor& t, absl::string_view field);

// Every element as fp32 (any dtype; fp32 is copied exactly). Returns the
// whole elements present in `data` (an unknown dtype gives an empty vector).
std::vector<float> ToFloats(const gdn::v1::Tensor& t);

// "[3, 2, 64]".
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace gdn::wire

#endif  // GDN_PROTO_TENSOR_CODEC_H_
