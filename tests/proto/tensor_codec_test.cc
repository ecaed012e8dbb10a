// Tests of proto/tensor_codec.h (gdn_wire).
#include "proto/tensor_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dtype_convert.h"
#include "tests/server/test_random.h"

namespace gdn::wire {
namespace {

using ::testing::HasSubstr;

std::vector<float> RandomValues(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> values(n);
  for (float& x : values) x = normal(rng);
  return values;
}

class TensorCodecTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    seed_ = gdn::testing::FreshSeed();
    rng_.seed(seed_);
  }
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

TEST(DTypeMappingTest, RoundTripsAndRejectsUnspecified) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) {
    gdn::v1::DType p = gdn::v1::DTYPE_UNSPECIFIED;
    ASSERT_TRUE(ToProtoDType(d, &p));
    EXPECT_NE(p, gdn::v1::DTYPE_UNSPECIFIED);
    DType back = d == DType::kF32 ? DType::kBF16 : DType::kF32;
    ASSERT_TRUE(FromProtoDType(p, &back));
    EXPECT_EQ(back, d);
  }
  DType untouched = DType::kF16;
  EXPECT_FALSE(FromProtoDType(gdn::v1::DTYPE_UNSPECIFIED, &untouched));
  EXPECT_FALSE(FromProtoDType(static_cast<gdn::v1::DType>(42), &untouched));
  EXPECT_EQ(untouched, DType::kF16);
}

TEST_P(TensorCodecTest, MakeTensorRoundsOnceAndToFloatsReadsBack) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const DType dtype = GetParam();
  const std::vector<int64_t> shape = {3, 2, 5};
  std::vector<float> values = RandomValues(30, rng_);
  const gdn::v1::Tensor t = MakeTensor(dtype, shape, values.data());
  EXPECT_EQ(t.data().size(), 30 * DTypeSize(dtype));
  EXPECT_EQ(std::vector<int64_t>(t.shape().begin(), t.shape().end()), shape);
  EXPECT_TRUE(CheckTensor(t, "x", dtype, shape).ok());

  std::vector<float> expected = values;
  RoundThrough(dtype, expected.data(), expected.size());
  const std::vector<float> got = ToFloats(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], expected[i]) << "element " << i;
  }
}

TEST_P(TensorCodecTest, MakeTensorRawCopiesBytes) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const DType dtype = GetParam();
  const std::vector<float> values = RandomValues(12, rng_);
  std::vector<char> raw(12 * DTypeSize(dtype));
  ConvertFromFloat(values.data(), values.size(), dtype, raw.data());
  const gdn::v1::Tensor t = MakeTensorRaw(dtype, {4, 3}, raw.data());
  ASSERT_EQ(t.data().size(), raw.size());
  EXPECT_EQ(std::memcmp(t.data().data(), raw.data(), raw.size()), 0);
  // Same as building from the values directly.
  EXPECT_EQ(t.data(), MakeTensor(dtype, {4, 3}, values.data()).data());
}

TEST_P(TensorCodecTest, CheckFiniteFindsFirstNanOrInf) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const DType dtype = GetParam();
  std::vector<float> values = RandomValues(40, rng_);
  EXPECT_TRUE(CheckFinite(MakeTensor(dtype, {40}, values.data()), "q").ok());
  std::uniform_int_distribution<int> pick(0, 39);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> copy = values;
    const int first = pick(rng_);
    copy[first] = bad;
    copy[39] = bad;  // a later one must not be the one reported
    const absl::Status s = CheckFinite(MakeTensor(dtype, {40}, copy.data()), "q");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("q"));
    EXPECT_THAT(s.message(),
                HasSubstr(absl::StrCat("element ", first, " ")));
  }
}

TEST_P(TensorCodecTest, CheckFiniteFindsFirstBadAcrossLargeTensors) {
  // Long enough to span several of the scan's blocks, odd length.
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const DType dtype = GetParam();
  const int n = 3 * 4096 + 17;
  std::vector<float> values = RandomValues(n, rng_);
  EXPECT_TRUE(CheckFinite(MakeTensor(dtype, {n}, values.data()), "v").ok());
  std::uniform_int_distribution<int> pick(0, n - 2);
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<float> copy = values;
    const int first = pick(rng_);
    copy[first] = std::numeric_limits<float>::quiet_NaN();
    copy[n - 1] = std::numeric_limits<float>::infinity();
    const absl::Status s = CheckFinite(MakeTensor(dtype, {n}, copy.data()), "v");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("element ", first, " ")));
  }
  std::vector<float> last_only = values;
  last_only[n - 1] = -std::numeric_limits<float>::infinity();
  EXPECT_THAT(CheckFinite(MakeTensor(dtype, {n}, last_only.data()), "v").message(),
              HasSubstr(absl::StrCat("element ", n - 1, " ")));
}

// Every 16-bit pattern (bf16, fp16) and every fp32 exponent with sampled
// mantissas and signs, placed at every position of a block and after a full
// one: FirstNonFinite finds exactly the Inf / NaN ones.
TEST(FirstNonFiniteTest, EveryPatternAtEveryPlaceOfABlock) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    const uint16_t mask = dtype == DType::kBF16 ? 0x7f80 : 0x7c00;
    std::vector<uint16_t> data(4096 + 37, 0x3c00 & ~mask);  // finite filler
    for (uint32_t pattern = 0; pattern < 65536; ++pattern) {
      const bool bad = (pattern & mask) == mask;
      const size_t at = (pattern * 2654435761u) % data.size();
      data[at] = static_cast<uint16_t>(pattern);
      ASSERT_EQ(FirstNonFinite(data.data(), data.size(), dtype), bad ? at : data.size())
          << DTypeName(dtype) << " pattern " << pattern << " at " << at;
      data[at] = 0;
    }
  }
  std::mt19937 rng(5);
  std::vector<uint32_t> data(4096 * 2 + 5, 0x3f800000);  // 1.0f
  for (uint32_t exponent = 0; exponent < 256; ++exponent) {
    for (int draw = 0; draw < 64; ++draw) {
      const uint32_t bits = (rng() & 0x807fffffu) | (exponent << 23);
      const bool bad = exponent == 255;
      const size_t at = rng() % data.size();
      data[at] = bits;
      ASSERT_EQ(FirstNonFinite(data.data(), data.size(), DType::kF32), bad ? at : data.size())
          << "bits " << bits << " at " << at;
      data[at] = 0x3f800000;
    }
  }
}

// Lengths through every path of the scan (large blocks, small blocks, the
// element-by-element rest; a gRPC slice may end anywhere), two bad values
// per draw: the first one is found.
TEST(FirstNonFiniteTest, TheFirstOfTwoInAnyLength) {
  std::mt19937 rng(11);
  for (size_t n : {1ul, 2ul, 63ul, 64ul, 65ul, 127ul, 200ul, 4095ul, 4096ul, 4097ul, 4160ul,
                   4161ul, 8191ul, 4096ul * 3 + 64 * 5 + 17}) {
    std::vector<uint16_t> data(n, 0x3f80);  // bf16 1.0
    for (int draw = 0; draw < 40; ++draw) {
      const size_t a = rng() % n, b = rng() % n;
      data[a] = 0x7fc0;  // NaN
      data[b] = 0xff80;  // -Inf
      ASSERT_EQ(FirstNonFinite(data.data(), n, DType::kBF16), std::min(a, b)) << "n " << n;
      data[a] = data[b] = 0x3f80;
    }
    ASSERT_EQ(FirstNonFinite(data.data(), n, DType::kBF16), n) << "n " << n;
  }
}

TEST(TensorCodecOverflowTest, LargeFiniteFp32BecomesInfInBf16) {
  // The wire rounding itself can create an Inf: 3.4e38 is finite in fp32 but
  // rounds to +Inf in fp16; the server checks what is on the wire.
  const float big = 3.0e38f;
  const gdn::v1::Tensor t = MakeTensor(DType::kF16, {1}, &big);
  EXPECT_FALSE(CheckFinite(t, "v").ok());
  EXPECT_TRUE(CheckFinite(MakeTensor(DType::kF32, {1}, &big), "v").ok());
}

TEST(CheckTensorTest, ShapeDtypeAndSizeErrorsNameTheField) {
  std::vector<float> values(24, 0.5f);
  const gdn::v1::Tensor t = MakeTensor(DType::kBF16, {2, 3, 4}, values.data());

  absl::Status s = CheckTensor(t, "q", DType::kBF16, {2, 3, 8});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("q"));
  EXPECT_THAT(s.message(), HasSubstr("[2, 3, 8]"));
  EXPECT_THAT(s.message(), HasSubstr("[2, 3, 4]"));

  s = CheckTensor(t, "k", DType::kBF16, {2, 12});
  EXPECT_THAT(s.message(), HasSubstr("k: expected shape [2, 12]"));

  s = CheckTensor(t, "v", DType::kF32, {2, 3, 4});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("v: expected dtype fp32"));

  gdn::v1::Tensor truncated = t;
  truncated.mutable_data()->resize(t.data().size() - 2);
  s = CheckTensor(truncated, "g", DType::kBF16, {2, 3, 4});
  EXPECT_THAT(s.message(), HasSubstr("g: expected 48 bytes"));

  s = CheckTensor(gdn::v1::Tensor(), "beta", DType::kF32, {2, 4});
  EXPECT_THAT(s.message(), HasSubstr("beta: missing"));

  EXPECT_TRUE(CheckTensor(t, "q", DType::kBF16, {2, 3, 4}).ok());
}

// Found by tests/fuzz/tensor_codec_fuzz.cc: a shape of 2^62 fp32 elements
// wanted 2^64 bytes, which wrapped to 0, so an empty tensor matched it; and
// a zero dimension after dimensions whose product overflows gave -1 instead
// of 0 elements.
TEST(CheckTensorTest, ShapesWithoutAByteSizeMatchNoData) {
  const std::vector<int64_t> huge = {int64_t{1} << 62};
  gdn::v1::Tensor empty;
  empty.set_dtype(gdn::v1::DTYPE_FP32);
  empty.add_shape(huge[0]);
  const absl::Status s = CheckTensor(empty, "q", DType::kF32, huge);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("q: shape"));
  EXPECT_EQ(NumElements({int64_t{1} << 40, int64_t{1} << 40, 0}), 0);
  EXPECT_EQ(NumElements({int64_t{1} << 40, int64_t{1} << 40}), -1);
  EXPECT_EQ(NumElements({0, -1}), -1);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, TensorCodecTest,
                         ::testing::Values(DType::kF32, DType::kBF16,
                                           DType::kF16),
                         [](const auto& info) {
                           return std::string(DTypeName(info.param));
                         });

}  // namespace
}  // namespace gdn::wire
