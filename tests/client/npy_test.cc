#include "client/npy.h"

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/dtype_convert.h"

namespace gdn::client {
namespace {

std::vector<float> RandomValues(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(NpyTest, Fp32RoundTripIsExact) {
  const std::vector<int64_t> shape = {3, 2, 5};
  const std::vector<float> values = RandomValues(30, 1);
  const NpyArray array = NpyFromFloats(NpyDType::kF32, shape, values);
  const std::string bytes = SerializeNpy(array);
  absl::StatusOr<NpyArray> back = ParseNpy(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dtype, NpyDType::kF32);
  EXPECT_EQ(back->shape, shape);
  EXPECT_EQ(NpyToFloats(*back), values);
}

TEST(NpyTest, HeaderIsVersion1AndDataAligned) {
  const NpyArray array = NpyFromFloats(NpyDType::kF32, {7}, RandomValues(7, 2));
  const std::string bytes = SerializeNpy(array);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), std::string("\x93NUMPY", 6));
  EXPECT_EQ(bytes[6], 1);
  EXPECT_EQ(bytes[7], 0);
  const size_t header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(bytes[10 + header_len - 1], '\n');
  EXPECT_NE(bytes.find("'shape': (7,)"), std::string::npos);  // 1-tuple
  EXPECT_EQ(bytes.size(), 10 + header_len + 7 * 4);
}

TEST(NpyTest, Bf16AndFp16RoundOnceAndReadBack) {
  const std::vector<float> values = RandomValues(24, 3);
  for (NpyDType dtype : {NpyDType::kBF16, NpyDType::kF16}) {
    const NpyArray array = NpyFromFloats(dtype, {4, 6}, values);
    ASSERT_EQ(array.data.size(), 48u);
    absl::StatusOr<NpyArray> back = ParseNpy(SerializeNpy(array));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->dtype, dtype);
    std::vector<float> want = values;
    RoundThrough(dtype == NpyDType::kBF16 ? DType::kBF16 : DType::kF16, want.data(), want.size());
    EXPECT_EQ(NpyToFloats(*back), want);
  }
  EXPECT_EQ(NpyDescr(NpyDType::kBF16), "<u2");  // bf16 travels as uint16 bits
}

// A header written the way NumPy itself writes it (double quotes accepted
// too, 2-D shape, fp64 data).
TEST(NpyTest, ParsesHandWrittenHeaders) {
  const std::vector<double> values = {1.5, -2.25, 3.0, 1e-3, 7.0, -8.5};
  std::string header = "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (2, 3), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header.push_back('\n');
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes.push_back(static_cast<char>(header.size() & 0xff));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * 8);
  absl::StatusOr<NpyArray> array = ParseNpy(bytes);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->shape, (std::vector<int64_t>{2, 3}));
  const std::vector<float> floats = NpyToFloats(*array);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(floats[i], static_cast<float>(values[i]));
}

TEST(NpyTest, ScalarShape) {
  const NpyArray array = NpyFromFloats(NpyDType::kF32, {}, {4.25f});
  absl::StatusOr<NpyArray> back = ParseNpy(SerializeNpy(array));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->shape.empty());
  EXPECT_EQ(back->num_elements(), 1);
  EXPECT_EQ(NpyToFloats(*back), std::vector<float>{4.25f});
}

TEST(NpyTest, RejectsBadFiles) {
  const std::string good = SerializeNpy(NpyFromFloats(NpyDType::kF32, {2, 2}, RandomValues(4, 4)));
  EXPECT_FALSE(ParseNpy("hello").ok());
  EXPECT_FALSE(ParseNpy(good.substr(0, good.size() - 1)).ok());  // truncated data
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_FALSE(ParseNpy(fortran).ok());
  std::string big_endian = good;
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  EXPECT_FALSE(ParseNpy(big_endian).ok());
  std::string int32 = good;
  int32.replace(int32.find("<f4"), 3, "<i4");
  absl::StatusOr<NpyArray> bad = ParseNpy(int32);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("<i4"), absl::string_view::npos);
}

TEST(NpyTest, FileRoundTrip) {
  const std::string path = ::testing::TempDir() + "/npy_test_file.npy";
  const NpyArray array = NpyFromFloats(NpyDType::kF32, {5, 3}, RandomValues(15, 5));
  ASSERT_TRUE(WriteNpyFile(path, array).ok());
  absl::StatusOr<NpyArray> back = ReadNpyFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->data, array.data);
  std::remove(path.c_str());
  EXPECT_EQ(ReadNpyFile(path).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gdn::client
