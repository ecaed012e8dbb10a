// The engine over a recording fake backend with the calls' tensors in
// memory regions: region inputs gathered, o written into the output region,
// device regions read and written by the kernel in place, and decode o
// copied back only without --decode_o_direct.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine/engine.h"
#include "tests/server/engine/engine_fixture.h"
#include "tests/server/engine/recording_backend.h"

namespace gdn {
namespace {

using namespace testing_engine;  // NOLINT: test helpers

class EngineTest : public testing_engine::EngineFixture {};

TEST_F(EngineTest, RegionInputsAreGatheredAndOLandsInTheOutputRegion) {
  ServerConfig config = SmallConfig();
  config.decode_lanes = 1;
  Start(config);
  CreateSessions({"x", "r", "i"});
  backend_->Hold(0);
  auto x = Submit(0, {{"x", 0, 1}}, 9);
  ASSERT_TRUE(backend_->WaitFor([](const std::vector<Op>& log) { return CountKernels(log) == 1; }));
  // r: v moved out of its block into a "region"; o into another.
  std::unique_ptr<ForwardCall> r = MakeCall(0, {{"r", 0, 3}}, 4);
  const InputLayout& layout = r->inputs.layout;
  std::vector<char> region(3 * layout.v_row), o_region(3 * layout.v_row, 0);
  std::memcpy(region.data(), r->inputs.block->data + layout.v, region.size());
  std::memset(r->inputs.block->data + layout.v, 0, region.size());  // only the region has v
  r->inputs.source[PackedInputs::kV] = region.data();
  r->o_region = o_region.data();
  auto from_region = SubmitCall(std::move(r));
  auto inline_call = Submit(0, {{"i", 0, 2}}, 5);
  while (engine_->running_calls() < 3) std::this_thread::yield();
  backend_->Release(0);
  absl::StatusOr<ForwardResult> got = Get(from_region);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->o.empty());
  EXPECT_EQ(got->positions, std::vector<int64_t>{3});
  const float* o = reinterpret_cast<const float*>(o_region.data());
  for (int row = 0; row < 3; ++row) EXPECT_EQ(o[row * kHv * kV], 4000 + row) << row;
  absl::StatusOr<ForwardResult> other = Get(inline_call);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(RowTags(*other), (std::vector<float>{5000, 5001}));
  ASSERT_TRUE(Get(x).ok());
  EXPECT_EQ(Kernels(backend_->Log())[1].tokens, (std::vector<int32_t>{3, 2}));  // one batch
}

// A whole call whose inputs and o region are all device memory (CUDA
// regions) is read and written by the kernel in place: no gather, no copy
// of o (the recording backend's "device" is host memory).
TEST_F(EngineTest, DeviceRegionsAreReadAndWrittenByTheKernelInPlace) {
  Start(SmallConfig());
  CreateSessions({"r"});
  std::unique_ptr<ForwardCall> r = MakeCall(0, {{"r", 0, 3}}, 6);
  const InputLayout& layout = r->inputs.layout;
  std::vector<char> region(layout.bytes + 256), o_region(3 * layout.v_row + 16, 0);
  char* base = region.data() + (16 - reinterpret_cast<uintptr_t>(region.data()) % 16) % 16;
  std::memcpy(base, r->inputs.block->data, layout.bytes);
  const size_t at[PackedInputs::kCount] = {layout.q, layout.k, layout.v, layout.g, layout.beta};
  for (int i = 0; i < PackedInputs::kCount; ++i) {
    r->inputs.source[i] = base + at[i];
    r->inputs.on_device[i] = true;
  }
  r->inputs.block.reset();
  char* o = o_region.data() + (16 - reinterpret_cast<uintptr_t>(o_region.data()) % 16) % 16;
  r->o_region = o;
  r->o_region_on_device = true;
  absl::StatusOr<ForwardResult> got = Get(SubmitCall(std::move(r)));
  ASSERT_TRUE(got.ok()) << got.status();
  const float* rows = reinterpret_cast<const float*>(o);
  for (int row = 0; row < 3; ++row) EXPECT_EQ(rows[row * kHv * kV], 6000 + row) << row;
  for (const Op& op : backend_->Log()) {
    EXPECT_NE(op.kind, Op::kGather);    // neither inputs nor o were copied
    EXPECT_NE(op.kind, Op::kDownload);
  }
}

// --decode_o_direct: a decode batch's kernel writes o straight into the
// pinned block its responses are sent from (no copy back); without it, and
// for a prefill, o is copied back. Every call gets its own rows either way,
// merged calls included.
class EngineODirectTest : public EngineTest, public testing::WithParamInterface<bool> {};

TEST_P(EngineODirectTest, DecodeOIsCopiedBackOnlyWithoutItAndEveryCallGetsItsRows) {
  const bool o_direct = GetParam();
  ServerConfig config = SmallConfig();
  config.decode_o_direct = o_direct;
  config.decode_lanes = 1;
  Start(config);
  CreateSessions({"a", "b", "c"});

  absl::StatusOr<ForwardResult> one = Get(Submit(0, {{"a", 0, 1}, {"b", 0, 1}}, 1));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(RowTags(*one), testing::ElementsAre(1000, 1001));

  // Two calls merged into one batch while the lane is held.
  backend_->Hold(0);
  auto first = Submit(1, {{"c", 0, 1}}, 2);
  ASSERT_TRUE(backend_->WaitFor([](const std::vector<Op>& log) { return CountKernels(log) == 2; }));
  auto second = Submit(0, {{"a", 1, 1}, {"b", 1, 1}}, 3);
  auto third = Submit(0, {{"c", 0, 1}}, 4);
  while (engine_->running_calls() < 3) std::this_thread::yield();  // all admitted
  backend_->Release(0);
  ASSERT_TRUE(Get(first).ok());
  absl::StatusOr<ForwardResult> r2 = Get(second), r3 = Get(third);
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_TRUE(r3.ok()) << r3.status();
  EXPECT_THAT(RowTags(*r2), testing::ElementsAre(3000, 3001));
  EXPECT_THAT(RowTags(*r3), testing::ElementsAre(4000));

  absl::StatusOr<ForwardResult> prefill = Get(Submit(1, {{"a", 0, kMaxDecodeTokens + 1}}, 5));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  ASSERT_EQ(RowTags(*prefill).size(), static_cast<size_t>(kMaxDecodeTokens + 1));
  EXPECT_EQ(RowTags(*prefill)[kMaxDecodeTokens], 5000 + kMaxDecodeTokens);

  // Copies back per batch: those logged after its kernel, before the next
  // batch's. Batches: one, first, second + third merged, the prefill.
  const std::vector<Op> log = backend_->Log();
  std::vector<int> downloads;
  for (const Op& op : log) {
    if (op.kind == Op::kDecode || op.kind == Op::kPrefill) downloads.push_back(0);
    if (op.kind == Op::kDownload && !downloads.empty()) ++downloads.back();
  }
  const int decode_copies = o_direct ? 0 : 1;
  EXPECT_THAT(downloads, testing::ElementsAre(decode_copies, decode_copies, decode_copies, 1));
}

INSTANTIATE_TEST_SUITE_P(DecodeODirect, EngineODirectTest, testing::Bool());

// A call whose check_before_start refuses (its region was unregistered)
// fails without running anything and changes no position.

}  // namespace
}  // namespace gdn
