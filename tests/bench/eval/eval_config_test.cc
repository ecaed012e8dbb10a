// gdn-eval's command line and grid restriction (bench/eval/eval_config.h).
#include "bench/eval/eval_config.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gdn::eval {
namespace {

absl::StatusOr<EvalFlags> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "gdn-eval");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseFlags(static_cast<int>(argv.size()), argv.data());
}

TEST(EvalConfigTest, ParsesLengths) {
  absl::StatusOr<EvalFlags> f = Parse({"--grid=full", "--lengths=131072,512"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->lengths, (std::vector<int>{131072, 512}));
  EXPECT_TRUE(Parse({"--grid=full"})->lengths.empty());
}

TEST(EvalConfigTest, RejectsBadLengths) {
  for (const char* bad : {"--lengths=", "--lengths=0", "--lengths=-4", "--lengths=512,x",
                          "--lengths=512,"}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<EvalFlags> f = Parse({"--grid=full", bad});
    ASSERT_FALSE(f.ok());
    EXPECT_NE(std::string(f.status().message()).find("--lengths"), std::string::npos);
  }
}

TEST(EvalConfigTest, RestrictLengthsKeepsOnlyThoseInOrder) {
  const Grid full = MakeGrid("full");
  absl::StatusOr<Grid> g = RestrictLengths(full, {131072, 512});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->check_lengths, (std::vector<int>{512, 131072}));  // the grid's order
  EXPECT_EQ(g->single_head_lengths, (std::vector<int>{131072}));
  for (int l : g->perf_lengths) EXPECT_TRUE(l == 512 || l == 131072) << l;
  // What is not length-indexed is untouched.
  EXPECT_EQ(g->check_batches, full.check_batches);
  EXPECT_EQ(g->decode_batches, full.decode_batches);
  EXPECT_EQ(g->extreme_length, full.extreme_length);
}

TEST(EvalConfigTest, RestrictLengthsEmptyKeepsAllAndUnknownIsAnError) {
  const Grid full = MakeGrid("full");
  absl::StatusOr<Grid> all = RestrictLengths(full, {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->check_lengths, full.check_lengths);
  EXPECT_EQ(all->perf_lengths, full.perf_lengths);
  absl::StatusOr<Grid> unknown = RestrictLengths(full, {512, 777});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(std::string(unknown.status().message()).find("777"), std::string::npos);
}

}  // namespace
}  // namespace gdn::eval
