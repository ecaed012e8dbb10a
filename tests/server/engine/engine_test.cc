// The engine over a recording fake backend (recording_backend.h): which
// calls go into which batch on which lane, in what order, what a batch
// waits for, and that o rows come back to the calls they belong to. Streams
// can be held "in flight" to see what the engine does meanwhile. No timing
// is asserted: a call that should run at once is waited for (a test that
// hangs fails by its timeout), a call that must wait is checked by what the
// log holds while it waits. (Memory regions and o written in place:
// engine_regions_test.cc.)
#include "server/engine/engine.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/engine/engine_fixture.h"
#include "tests/server/engine/recording_backend.h"

namespace gdn {
namespace {

using namespace testing_engine;  // NOLINT: test helpers

class EngineTest : public testing_engine::EngineFixture {};

TEST_F(EngineTest, ALoneCallRunsAtOnceWhateverTheQueueDelay) {
  ServerConfig config = SmallConfig();
  config.max_queue_delay = absl::Seconds(300);  // only applies while a lane is busy
  Start(config);
  CreateSessions({"a"});
  absl::StatusOr<ForwardResult> r = Get(Submit(0, {{"a", 0, 1}}, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->positions, std::vector<int64_t>{1});
  const std::vector<Op> kernels = Kernels(backend_->Log());
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].kind, Op::kDecode);
  EXPECT_EQ(kernels[0].tokens, std::vector<int32_t>{1});
}

TEST_F(EngineTest, APollingEngineThreadRunsEachCallInOrder) {
  // --engine_poll_us: the engine thread, idle, polls for the next call, so
  // calls are handed to it (a warm core) instead of running on the request
  // thread. A poll far longer than the test: a call it failed to notice
  // would wait it out (Get's 30 s bound fails).
  ServerConfig config = SmallConfig();
  config.idle_poll = absl::Seconds(120);
  Start(config);
  CreateSessions({"a"});
  for (int64_t position = 0; position < 5; ++position) {
    absl::StatusOr<ForwardResult> r = Get(Submit(0, {{"a", position, 1}}, 1));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->positions, std::vector<int64_t>{position + 1});
  }
  const std::vector<Op> kernels = Kernels(backend_->Log());
  ASSERT_EQ(kernels.size(), 5u);
  for (const Op& k : kernels) EXPECT_NE(k.thread, std::this_thread::get_id());
}

TEST_F(EngineTest, CallsMergeWhileTheirLaneIsBusyInAdmissionOrder) {
  ServerConfig config = SmallConfig();
  config.decode_lanes = 1;
  Start(config);
  CreateSessions({"a", "b", "c", "d"});
  backend_->Hold(0);
  auto a = Submit(0, {{"a", 0, 1}}, 1);
  ASSERT_TRUE(backend_->WaitFor([](const std::vector<Op>& log) { return CountKernels(log) == 1; }));
  auto b = Submit(0, {{"b", 0, 2}}, 2);
  auto c = Submit(0, {{"c", 0, 3}, {"d", 0, 1}}, 3);
  while (engine_->running_calls() < 3) std::this_thread::yield();  // all admitted
  EXPECT_EQ(CountKernels(backend_->Log()), 1);  // nothing more while the lane is held
  backend_->Release(0);
  for (auto* o : {&a, &b, &c}) ASSERT_TRUE(Get(*o).ok());
  const std::vector<Op> kernels = Kernels(backend_->Log());
  ASSERT_EQ(kernels.size(), 2u);
  // b and c's two sequences in one batch, in admission order.
  EXPECT_EQ(kernels[1].tokens, (std::vector<int32_t>{2, 3, 1}));
}

TEST_F(EngineTest, TheNextBatchIsStagedAndLaunchedWhileTheLastIsInFlight) {
  ServerConfig config = SmallConfig();
  config.decode_lanes = 2;
  Start(config);
  CreateSessions({"a", "b"});
  backend_->Hold(0);
  auto a = Submit(0, {{"a", 0, 1}}, 1);
  ASSERT_TRUE(backend_->WaitFor([](const std::vector<Op>& log) { return CountKernels(log) == 1; }));
  auto b = Submit(1, {{"b", 0, 1}}, 2);
  // b runs on the second lane and completes while a is still on the device.
  absl::StatusOr<ForwardResult> rb = Get(b);
  ASSERT_TRUE(rb.ok());
  const std::vector<Op> log = backend_->Log();
  for (const Op& op : log) EXPECT_FALSE(op.kind == Op::kDone && op.stream == 0);
  const std::vector<Op> kernels = Kernels(log);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].stream, 0);
  EXPECT_EQ(kernels[1].stream, 1);
  backend_->Release(0);
  ASSERT_TRUE(Get(a).ok());
}

TEST_F(EngineTest, ALongPrefillIsChunkedInOrderAcrossLanesAndNeverHoldsUpADecode) {
  ServerConfig config = SmallConfig();
  config.decode_lanes = 1;   // stream 0
  config.prefill_lanes = 2;  // streams 1, 2
  Start(config);
  CreateSessions({"p", "d"});
  backend_->Hold(1);
  backend_->Hold(2);
  auto p = Submit(0, {{"p", 0, 200}}, 1);  // chunks of 64: 64, 64, 64, 8
  ASSERT_TRUE(backend_->WaitFor([](const std::vector<Op>& log) { return CountKernels(log) == 2; }));
  // Both prefill lanes are busy; a decode runs on its own lane meanwhile.
  absl::StatusOr<ForwardResult> d = Get(Submit(0, {{"d", 0, 1}}, 2));
  ASSERT_TRUE(d.ok());
  // The first lane lets go: chunks 3 and 4 run there (3 waits on the device
  // for chunk 2's lane) and are seen done before chunk 2 is.
  backend_->Release(1);
  ASSERT_TRUE(backend_->WaitFor([](const std::vector<Op>& log) { return CountKernels(log) == 5; }));
  backend_->Release(2);
  absl::StatusOr<ForwardResult> rp = Get(p);
  ASSERT_TRUE(rp.ok()) << rp.status();
  EXPECT_EQ(rp->positions, std::vector<int64_t>{200});
  std::vector<float> rows = RowTags(*rp);
  ASSERT_EQ(rows.size(), 200u);
  for (int r = 0; r < 200; ++r) ASSERT_EQ(rows[r], 1000 + r) << "row " << r;

  const std::vector<Op> log = backend_->Log();
  std::vector<Op> chunks;
  for (const Op& op : Kernels(log)) {
    if (op.kind == Op::kPrefill) chunks.push_back(op);
  }
  ASSERT_EQ(chunks.size(), 4u);
  int32_t write_page = chunks[0].final_pages[0];
  EXPECT_EQ(chunks[0].initial_pages[0], kZeroStatePage);  // a new session
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(chunks[i].tokens, std::vector<int32_t>{i < 3 ? 64 : 8});
    EXPECT_EQ(chunks[i].final_pages[0], write_page);
    if (i > 0) EXPECT_EQ(chunks[i].initial_pages[0], write_page);  // continues the state
  }
  // Each chunk that starts beside its predecessor's lane waits for it there.
  auto waited = [&log](int stream, int other) {
    for (const Op& op : log) {
      if (op.kind == Op::kWaitFor && op.stream == stream && op.other_stream == other) return true;
    }
    return false;
  };
  EXPECT_NE(chunks[1].stream, chunks[0].stream);
  EXPECT_TRUE(waited(chunks[1].stream, chunks[0].stream));
  EXPECT_EQ(chunks[2].stream, chunks[0].stream);
  EXPECT_TRUE(waited(chunks[2].stream, chunks[1].stream));
}

TEST_F(EngineTest, CallsOfOneStateApplyInPositionOrderWhateverTheArrivalOrder) {
  Start(SmallConfig());
  CreateSessions({"a"});
  auto second = Submit(1, {{"a", 1, 2}}, 2);  // parks: position 1 is ahead
  auto first = Submit(1, {{"a", 0, 1}}, 1);
  absl::StatusOr<ForwardResult> r1 = Get(first);
  absl::StatusOr<ForwardResult> r2 = Get(second);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(r1->positions, std::vector<int64_t>{1});
  EXPECT_EQ(r2->positions, std::vector<int64_t>{3});
  const std::vector<Op> kernels = Kernels(backend_->Log());
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].tokens, std::vector<int32_t>{1});
  EXPECT_EQ(kernels[1].tokens, std::vector<int32_t>{2});
  EXPECT_EQ(kernels[1].initial_pages[0], kernels[0].final_pages[0]);  // reads what the first wrote
  // A retry of the first is refused by position and changes nothing.
  absl::StatusOr<ForwardResult> retry = Get(Submit(1, {{"a", 0, 1}}, 1));
  ASSERT_FALSE(retry.ok());
  EXPECT_EQ(retry.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CountKernels(backend_->Log()), 2);
}

TEST_F(EngineTest, MergedCallsGetTheirOwnRowsBack) {
  ServerConfig config = SmallConfig();
  config.decode_lanes = 1;
  Start(config);
  CreateSessions({"x", "a", "b", "c", "d", "e"});
  backend_->Hold(0);
  auto x = Submit(0, {{"x", 0, 1}}, 9);
  ASSERT_TRUE(backend_->WaitFor([](const std::vector<Op>& log) { return CountKernels(log) == 1; }));
  auto one = Submit(0, {{"a", 0, 3}, {"b", 0, 1}}, 1);
  auto two = Submit(0, {{"c", 0, 8}}, 2);
  auto three = Submit(0, {{"d", 0, 2}, {"e", 0, 5}}, 3);
  while (engine_->running_calls() < 4) std::this_thread::yield();
  backend_->Release(0);
  const std::vector<std::pair<std::shared_ptr<Outcome>, int>> calls = {
      {one, 4}, {two, 8}, {three, 7}};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<ForwardResult> r = Get(calls[i].first);
    ASSERT_TRUE(r.ok()) << r.status();
    const std::vector<float> rows = RowTags(*r);
    ASSERT_EQ(rows.size(), static_cast<size_t>(calls[i].second));
    for (size_t row = 0; row < rows.size(); ++row) EXPECT_EQ(rows[row], (i + 1) * 1000 + row);
  }
  ASSERT_TRUE(Get(x).ok());
  // The merged batch gathered from three calls' blocks (more than one piece).
  int gathers_with_pieces = 0;
  for (const Op& op : backend_->Log()) gathers_with_pieces += op.kind == Op::kGather && op.gather_items > 1;
  EXPECT_GE(gathers_with_pieces, 1);
}

TEST_F(EngineTest, AKernelFailureFailsItsCallsAndChangesNoPosition) {
  Start(SmallConfig());
  CreateSessions({"a"});
  backend_->FailNextKernel();
  absl::StatusOr<ForwardResult> failed = Get(Submit(0, {{"a", 0, 1}}, 1));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(failed.status().message()),
              ::testing::HasSubstr("decode kernel call failed"));
  absl::StatusOr<ForwardResult> again = Get(Submit(0, {{"a", 0, 1}}, 1));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->positions, std::vector<int64_t>{1});
}

// Inputs that lie outside the call's block (a client's region) are gathered
// from there; o goes into the call's output region and not into the
// result, also when the call shares a batch with an inline one.
TEST_F(EngineTest, ACallRefusedBeforeItStartsRunsNothing) {
  Start(SmallConfig());
  CreateSessions({"a"});
  std::unique_ptr<ForwardCall> call = MakeCall(0, {{"a", 0, 2}}, 1);
  call->check_before_start = [] {
    return absl::FailedPreconditionError("region 'r' was unregistered");
  };
  absl::StatusOr<ForwardResult> refused = Get(SubmitCall(std::move(call)));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CountKernels(backend_->Log()), 0);
  absl::StatusOr<ForwardResult> again = Get(Submit(0, {{"a", 0, 1}}, 1));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->positions, std::vector<int64_t>{1});
}

// A draft's per-token pages reach the kernel as kPerTokenStates slots
// (kMaxDecodeTokens - 1 per sequence: its T - 1 pages of its own, then
// kZeroStatePage; all kZeroStatePage for a sequence that is no draft), and
// the next call at p + k starts from the page of the state after token k.
TEST_F(EngineTest, DraftPagesReachTheKernelAndTheAcceptedOneIsReadNext) {
  Start(SmallConfig());
  CreateSessions({"a", "b"});
  std::unique_ptr<ForwardCall> call = MakeCall(0, {{"a", 0, 4}, {"b", 0, 2}}, 1);
  call->sequences[0].draft = true;
  absl::StatusOr<ForwardResult> r = Get(SubmitCall(std::move(call)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->positions, (std::vector<int64_t>{4, 2}));
  const Op draft = Kernels(backend_->Log()).back();
  EXPECT_EQ(draft.kind, Op::kDecode);
  EXPECT_EQ(draft.checkpoint_interval, kPerTokenStates);
  constexpr int kSlots = kMaxDecodeTokens - 1;
  ASSERT_EQ(draft.checkpoint_pages.size(), 2u * kSlots);
  std::vector<int32_t> pages = {draft.final_pages[0], draft.final_pages[1]};
  for (int j = 0; j < kSlots; ++j) {
    if (j < 3) {
      pages.push_back(draft.checkpoint_pages[j]);
    } else {
      EXPECT_EQ(draft.checkpoint_pages[j], kZeroStatePage) << j;
    }
    EXPECT_EQ(draft.checkpoint_pages[kSlots + j], kZeroStatePage) << j;
  }
  std::vector<int32_t> sorted = pages;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());  // all distinct
  for (int32_t page : pages) EXPECT_GE(page, 0);

  // Position 2 accepts two tokens: the kernel reads the state after token 2.
  ASSERT_TRUE(Get(Submit(0, {{"a", 2, 1}}, 2)).ok());
  const Op next = Kernels(backend_->Log()).back();
  EXPECT_EQ(next.initial_pages[0], draft.checkpoint_pages[1]);
  EXPECT_EQ(next.checkpoint_interval, 0);
  EXPECT_TRUE(next.checkpoint_pages.empty());
  // A retry of the draft is refused naming the range, now that it is gone.
  absl::StatusOr<ForwardResult> retry = Get(Submit(0, {{"a", 0, 4}}, 3));
  EXPECT_EQ(retry.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gdn
