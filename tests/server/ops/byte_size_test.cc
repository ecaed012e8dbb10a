#include "server/ops/byte_size.h"

#include <string>

#include "gtest/gtest.h"

namespace gdn {
namespace {

TEST(ByteSizeTest, ParsesBinaryAndDecimalUnits) {
  size_t bytes = 0;
  ASSERT_TRUE(ParseByteSize("2GiB", &bytes));
  EXPECT_EQ(bytes, size_t{2} << 30);
  ASSERT_TRUE(ParseByteSize("512MiB", &bytes));
  EXPECT_EQ(bytes, size_t{512} << 20);
  ASSERT_TRUE(ParseByteSize("64kib", &bytes));
  EXPECT_EQ(bytes, size_t{64} << 10);
  ASSERT_TRUE(ParseByteSize("1.5GiB", &bytes));
  EXPECT_EQ(bytes, (size_t{3} << 30) / 2);
  ASSERT_TRUE(ParseByteSize("3G", &bytes));
  EXPECT_EQ(bytes, size_t{3000000000});
  ASSERT_TRUE(ParseByteSize("4096", &bytes));
  EXPECT_EQ(bytes, 4096u);
}

TEST(ByteSizeTest, RejectsGarbage) {
  size_t bytes = 7;
  for (const char* bad : {"", "GiB", "12XB", "-1GiB", "1..2G", "2 GiBs"}) {
    EXPECT_FALSE(ParseByteSize(bad, &bytes)) << bad;
  }
  EXPECT_EQ(bytes, 7u);
}

TEST(ByteSizeTest, FormatRoundTrips) {
  for (size_t bytes : {size_t{0}, size_t{1000}, size_t{3} << 20,
                       (size_t{5} << 30) + 1024, size_t{1} << 40}) {
    size_t back = 1;
    ASSERT_TRUE(ParseByteSize(FormatByteSize(bytes), &back)) << bytes;
    EXPECT_EQ(back, bytes);
  }
  EXPECT_EQ(FormatByteSize(size_t{2} << 30), "2GiB");
}

TEST(ByteSizeTest, FlagTypeParses) {
  ByteSize size;
  std::string error;
  ASSERT_TRUE(AbslParseFlag("256MiB", &size, &error));
  EXPECT_EQ(size.bytes, size_t{256} << 20);
  EXPECT_FALSE(AbslParseFlag("lots", &size, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_EQ(AbslUnparseFlag(ByteSize{size_t{1} << 20}), "1MiB");
}

}  // namespace
}  // namespace gdn
