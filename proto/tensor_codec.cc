#include "proto/tensor_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/dtype_convert.h"
#include "proto/cpu_clones.h"

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
  }
  // A zero dimension makes the product 0 however large the others are.
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  for (int64_t d : shape) {
    if (n > std::numeric_limits<int64_t>::max() / d) return -1;
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

absl::Status CheckTensorHeader(const TensorHeader& t, absl::string_view field, DType dtype,
                               const std::vector<int64_t>& shape) {
  // Built only for an error: every Forward checks nine headers.
  auto expected = [&] { return absl::StrCat(ShapeString(shape), " (", DTypeName(dtype), ")"); };
  DType got_dtype;
  if (!FromProtoDType(t.dtype, &got_dtype) || got_dtype != dtype) {
    if (t.dtype == gdn::v1::DTYPE_UNSPECIFIED && t.shape.empty() && t.data_bytes == 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": missing, expected ", expected()));
    }
    return absl::InvalidArgumentError(absl::StrCat(field, ": expected dtype ", DTypeName(dtype),
                                                   " ", ShapeString(shape), ", got ",
                                                   DTypeLabel(t.dtype)));
  }
  if (t.shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": expected shape ", expected(),
                                                   ", got ", ShapeString(t.shape)));
  }
  // An expected shape without a byte size (a negative dimension, or more
  // than 2^64 bytes, which would wrap to a small size) matches no data.
  const int64_t n = NumElements(shape);
  if (n < 0 || static_cast<uint64_t>(n) > UINT64_MAX / DTypeSize(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": shape ", expected(),
                                                   " has no byte size"));
  }
  const uint64_t want_bytes = static_cast<uint64_t>(n) * DTypeSize(dtype);
  if (t.data_bytes != want_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": expected ", want_bytes,
                                                   " bytes of data for ", expected(), ", got ",
                                                   t.data_bytes));
  }
  return absl::OkStatus();
}

absl::Status CheckTensor(const gdn::v1::Tensor& t, absl::string_view field, DType dtype,
                         const std::vector<int64_t>& shape) {
  return CheckTensorHeader({t.dtype(), ShapeOf(t), t.data().size()}, field, dtype, shape);
}

namespace {

// Whether element i has an all-ones exponent (Inf or NaN).
template <typename Bits, Bits kExponentMask>
bool IsNonFinite(const char* data, size_t i) {
  Bits bits;
  std::memcpy(&bits, data + sizeof(Bits) * i, sizeof(Bits));
  return (bits & kExponentMask) == kExponentMask;
}

// Index of the first non-finite element, or n. The hot path (every value
// finite) scans blocks with a branch-free loop the compiler vectorises into
// three operations per vector: validating every Forward request's
// activations is one of the larger costs of the request path (perf on a
// --diagnostic_no_compute cpu server). The exponent field plus its lowest
// bit carries into the sign bit exactly when the field is all ones:
// (bits & mask) + lowest exponent bit >= sign bit <=> Inf or NaN. OR-ing
// those sums over a block leaves the sign bit set iff any element is bad.
// Built per x86-64 level (cpu_clones.h): AVX-512 scans 4x faster.
template <typename Bits, Bits kExponentMask>
GDN_CPU_CLONES size_t FirstNonFinite(const char* data, size_t n) {
  constexpr Bits kLowestExponentBit = kExponentMask & (~kExponentMask + 1);
  constexpr Bits kSignBit = static_cast<Bits>(Bits{1} << (8 * sizeof(Bits) - 1));
  static_assert(static_cast<Bits>(kExponentMask + kLowestExponentBit) == kSignBit);
  const size_t start = SkipCleanBlocks<4096, 64>(n, [&](size_t at, auto block) {
    Bits carry = 0;
    for (size_t i = 0; i < decltype(block)::value; ++i) {
      Bits bits;
      std::memcpy(&bits, data + sizeof(Bits) * (at + i), sizeof(Bits));
      carry |= static_cast<Bits>((bits & kExponentMask) + kLowestExponentBit);
    }
    return (carry & kSignBit) == 0;
  });
  for (size_t i = start; i < n; ++i) {
    if (IsNonFinite<Bits, kExponentMask>(data, i)) return i;
  }
  return n;
}

}  // namespace

size_t FirstNonFinite(const void* data, size_t n, DType dtype) {
  // An all-ones exponent means Inf or NaN.
  const char* bytes = static_cast<const char*>(data);
  switch (dtype) {
    case DType::kF32: return FirstNonFinite<uint32_t, 0x7f800000u>(bytes, n);
    case DType::kBF16: return FirstNonFinite<uint16_t, 0x7f80u>(bytes, n);
    case DType::kF16: return FirstNonFinite<uint16_t, 0x7c00u>(bytes, n);
  }
  return n;
}

absl::Status NonFiniteError(absl::string_view field, const void* data, DType dtype,
                            size_t index) {
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": element ", index, " is ", LoadAsFloat(static_cast<const char*>(data), dtype, index),
      "; every value must be finite"));
}

absl::Status CheckFinite(const gdn::v1::Tensor& t, absl::string_view field) {
  DType dtype;
  if (!FromProtoDType(t.dtype(), &dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": unknown dtype ", static_cast<int>(t.dtype())));
  }
  const size_t n = t.data().size() / DTypeSize(dtype);
  const size_t bad = FirstNonFinite(t.data().data(), n, dtype);
  return bad < n ? NonFiniteError(field, t.data().data(), dtype, bad) : absl::OkStatus();
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
