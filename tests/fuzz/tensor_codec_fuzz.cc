// Fuzz target: the Tensor codec (proto/tensor_codec.h) on tensors from
// arbitrary bytes. The input is a serialized gdn.v1.Tensor; when it does not
// parse, its first byte picks a dtype and the rest are the raw elements
// (the hot path of FirstNonFinite sees data without protobuf framing).
//
// Properties, beyond "no crash, no sanitizer finding":
//   - CheckTensor against the tensor's own dtype and shape is OK exactly when
//     the data holds prod(shape) whole elements (and it always names the field);
//   - FirstNonFinite (branch-free, vectorised blocks) agrees with a plain
//     element-by-element isfinite; CheckFinite agrees with it too;
//   - ToFloats converts every whole element like LoadAsFloat (fp32 bit-exact);
//   - MakeTensorRaw rebuilds a consistent tensor byte for byte.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gdn/v1/gdn.pb.h"
#include "kernels/dtype_convert.h"
#include "proto/tensor_codec.h"
#include "tests/fuzz/fuzz_check.h"

namespace gdn::wire {
namespace {

size_t NaiveFirstNonFinite(const char* data, size_t n, DType dtype) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(LoadAsFloat(data, dtype, i))) return i;
  }
  return n;
}

void Fuzz(const gdn::v1::Tensor& t) {
  const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  DType dtype;
  if (!FromProtoDType(t.dtype(), &dtype)) {
    FUZZ_CHECK(!CheckFinite(t, "x").ok());
    FUZZ_CHECK(ToFloats(t).empty());
    FUZZ_CHECK(!CheckTensor(t, "x", DType::kF32, shape).ok());
    return;
  }
  const size_t elem = DTypeSize(dtype);
  const int64_t count = NumElements(shape);
  const bool consistent = count >= 0 &&
                          static_cast<uint64_t>(count) <= UINT64_MAX / elem &&
                          t.data().size() == static_cast<uint64_t>(count) * elem;
  const absl::Status checked = CheckTensor(t, "x", dtype, shape);
  FUZZ_CHECK(checked.ok() == consistent);
  if (!checked.ok()) FUZZ_CHECK(checked.message().substr(0, 3) == "x: ");

  const char* data = t.data().data();
  const size_t n = t.data().size() / elem;
  const size_t naive = NaiveFirstNonFinite(data, n, dtype);
  FUZZ_CHECK(FirstNonFinite(data, n, dtype) == naive);
  FUZZ_CHECK(CheckFinite(t, "x").ok() == (naive == n));

  const std::vector<float> floats = ToFloats(t);
  FUZZ_CHECK(floats.size() == n);
  for (size_t i = 0; i < n; ++i) {
    const float want = LoadAsFloat(data, dtype, i);
    FUZZ_CHECK(std::memcmp(&floats[i], &want, sizeof(float)) == 0 ||
               (std::isnan(floats[i]) && std::isnan(want)));
  }
  if (dtype == DType::kF32 && n > 0) {
    FUZZ_CHECK(std::memcmp(floats.data(), data, n * sizeof(float)) == 0);
  }
  if (consistent) {
    const gdn::v1::Tensor rebuilt = MakeTensorRaw(dtype, shape, data);
    FUZZ_CHECK(rebuilt.data() == t.data() && rebuilt.dtype() == t.dtype());
    FUZZ_CHECK(rebuilt.shape_size() == t.shape_size());
  }
}

}  // namespace
}  // namespace gdn::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gdn::v1::Tensor t;
  if (!t.ParseFromArray(data, static_cast<int>(size))) {
    if (size == 0) return 0;
    t.Clear();
    t.set_dtype(static_cast<gdn::v1::DType>(1 + data[0] % 3));  // fp32, bf16, fp16
    t.set_data(reinterpret_cast<const char*>(data) + 1, size - 1);
  }
  gdn::wire::Fuzz(t);
  return 0;
}
