#include "proto/tensor_codec.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/dtype_convert.h"

// The wire is little-endian raw elements; this codec copies bytes as they are,
// which is right only on a little-endian host (every target of this project).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "gdn wire codec assumes a little-endian host");

namespace gdn::wire {

bool ToProtoDType(DType d, gdn::v1::DType* out) {
  switch (d) {
    case DType::kF32: *out = gdn::v1::DTYPE_FP32; return true;
    case DType::kBF16: *out = gdn::v1::DTYPE_BF16; return true;
    case DType::kF16: *out = gdn::v1::DTYPE_FP16; return true;
  }
  return false;
}

bool FromProtoDType(gdn::v1::DType p, DType* out) {
  switch (p) {
    case gdn::v1::DTYPE_FP32: *out = DType::kF32; return true;
    case gdn::v1::DTYPE_BF16: *out = DType::kBF16; return true;
    case gdn::v1::DTYPE_FP16: *out = DType::kF16; return true;
    default: return false;
  }
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

namespace {

gdn::v1::Tensor EmptyTensor(DType dtype, std::vector<int64_t> shape) {
  gdn::v1::Tensor t;
  gdn::v1::DType proto_dtype = gdn::v1::DTYPE_UNSPECIFIED;
  ToProtoDType(dtype, &proto_dtype);
  t.set_dtype(proto_dtype);
  for (int64_t d : shape) t.add_shape(d);
  return t;
}

std::vector<int64_t> ShapeOf(const gdn::v1::Tensor& t) {
  return std::vector<int64_t>(t.shape().begin(), t.shape().end());
}

std::string DTypeLabel(gdn::v1::DType p) {
  DType d;
  if (FromProtoDType(p, &d)) return std::string(DTypeName(d));
  return absl::StrCat("dtype ", static_cast<int>(p));
}

}  // namespace

gdn::v1::Tensor MakeTensor(DType dtype, std::vector<int64_t> shape,
                           const float* values) {
  const int64_t n = std::max<int64_t>(NumElements(shape), 0);
  gdn::v1::Tensor t = EmptyTensor(dtype, std::move(shape));
  std::string* data = t.mutable_data();
  data->resize(static_cast<size_t>(n) * DTypeSize(dtype));
  if (n > 0) ConvertFromFloat(values, static_cast<size_t>(n), dtype, data->data());
  return t;
}

gdn::v1::Tensor MakeTensorRaw(DType dtype, std::vector<int64_t> shape,
                              const void* bytes) {
  const int64_t n = std::max<int64_t>(NumElements(shape), 0);
  gdn::v1::Tensor t = EmptyTensor(dtype, std::move(shape));
  const size_t size = static_cast<size_t>(n) * DTypeSize(dtype);
  if (size > 0) t.set_data(static_cast<const char*>(bytes), size);
  return t;
}

absl::Status CheckTensor(const gdn::v1::Tensor& t, absl::string_view field,
                         DType dtype, const std::vector<int64_t>& shape) {
  const std::vector<int64_t> got = ShapeOf(t);
  const std::string expected =
      absl::StrCat(ShapeString(shape), " (", DTypeName(dtype), ")");
  DType got_dtype;
  if (!FromProtoDType(t.dtype(), &got_dtype) || got_dtype != dtype) {
    if (t.dtype() == gdn::v1::DTYPE_UNSPECIFIED && got.empty() &&
        t.data().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": missing, expected ", expected));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": expected dtype ", DTypeName(dtype), " ",
                     ShapeString(shape), ", got ", DTypeLabel(t.dtype())));
  }
  if (got != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": expected shape ", expected, ", got ", ShapeString(got)));
  }
  const int64_t n = NumElements(shape);
  const uint64_t want_bytes =
      static_cast<uint64_t>(n < 0 ? 0 : n) * DTypeSize(dtype);
  if (t.data().size() != want_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": expected ", want_bytes, " bytes of data for ", expected,
        ", got ", t.data().size()));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(const gdn::v1::Tensor& t, absl::string_view field) {
  DType dtype;
  if (!FromProtoDType(t.dtype(), &dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": unknown dtype ", static_cast<int>(t.dtype())));
  }
  const size_t n = t.data().size() / DTypeSize(dtype);
  const char* data = t.data().data();
  // Check the exponent bits directly: all-ones exponent means Inf or NaN.
  for (size_t i = 0; i < n; ++i) {
    bool finite;
    switch (dtype) {
      case DType::kF32: {
        uint32_t bits;
        std::memcpy(&bits, data + 4 * i, 4);
        finite = (bits & 0x7f800000u) != 0x7f800000u;
        break;
      }
      case DType::kBF16: {
        uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        finite = (bits & 0x7f80u) != 0x7f80u;
        break;
      }
      case DType::kF16: {
        uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        finite = (bits & 0x7c00u) != 0x7c00u;
        break;
      }
      default:
        finite = true;
    }
    if (!finite) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": element ", i, " is ", LoadAsFloat(data, dtype, i),
          "; every value must be finite"));
    }
  }
  return absl::OkStatus();
}

std::vector<float> ToFloats(const gdn::v1::Tensor& t) {
  DType dtype;
  if (!FromProtoDType(t.dtype(), &dtype)) return {};
  const size_t n = t.data().size() / DTypeSize(dtype);
  std::vector<float> out(n);
  if (n > 0) ConvertToFloat(t.data().data(), dtype, n, out.data());
  return out;
}

}  // namespace gdn::wire
