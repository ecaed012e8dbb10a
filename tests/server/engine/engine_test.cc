// The engine over a recording fake backend (recording_backend.h): which
// calls go into which batch on which lane, in what order, what a batch
// waits for, and that o rows come back to the calls they belong to. Streams
// can be held "in flight" to see what the engine does meanwhile. No timing
// is asserted: a call that should run at once is waited for (a test that
// hangs fails by its timeout), a call that must wait is checked by what the
// log holds while it waits.
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
#include "tests/server/engine/recording_backend.h"

namespace gdn {
namespace {

using testing_engine::Op;
using testing_engine::RecordingBackend;

constexpr int kHv = 4, kV = 64;

ServerConfig SmallConfig() {
  ServerConfig c;
  c.num_layers = 2;
  c.options.shape = {2, kHv, 64, kV};
  c.options.input_dtype = DType::kF32;
  c.device_state_budget_bytes = 4 << 20;  // 64 pages of 64 KiB
  c.host_state_budget_bytes = 4 << 20;
  c.max_message_bytes = 1 << 20;
  c.io_buffer_bytes = 64 << 20;
  c.max_batch_tokens = 64;
  return c;
}

struct Outcome {
  std::promise<absl::StatusOr<ForwardResult>> promise;
  std::future<absl::StatusOr<ForwardResult>> future = promise.get_future();
};

class EngineTest : public ::testing::Test {
 protected:
  void Start(ServerConfig config) {
    config_ = config;
    auto backend = std::make_unique<RecordingBackend>();
    backend_ = backend.get();
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Create(config, std::move(backend), nullptr);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }

  void CreateSessions(const std::vector<std::string>& ids) {
    std::promise<void> done;
    engine_->RunSessionCommand("", [&](StateCache& cache) {
      for (const std::string& id : ids) ASSERT_TRUE(cache.CreateSession(id).ok());
      done.set_value();
    });
    done.get_future().wait();
  }

  // A call on `layer` over (session, position, tokens) whose v rows are
  // `tag` * 1000 + row (fp32), so o = v shows where rows went.
  std::shared_ptr<Outcome> Submit(int layer,
                                  const std::vector<std::tuple<std::string, int64_t, int>>& seqs,
                                  float tag) {
    return SubmitCall(MakeCall(layer, seqs, tag));
  }

  std::unique_ptr<ForwardCall> MakeCall(
      int layer, const std::vector<std::tuple<std::string, int64_t, int>>& seqs, float tag) {
    auto call = std::make_unique<ForwardCall>();
    call->layer = layer;
    int32_t rows = 0;
    for (const auto& [id, position, tokens] : seqs) {
      call->sequences.push_back({id, position, tokens, rows});
      rows += tokens;
    }
    call->total_tokens = rows;
    const InputLayout layout = InputLayout::For(config_.options.shape, DType::kF32, rows);
    absl::StatusOr<std::shared_ptr<IoBlock>> block = engine_->arena().Acquire(layout.bytes);
    EXPECT_TRUE(block.ok());
    std::memset((*block)->data, 0, layout.bytes);
    float* v = reinterpret_cast<float*>((*block)->data + layout.v);
    for (int32_t r = 0; r < rows; ++r) {
      for (int i = 0; i < kHv * kV; ++i) v[r * kHv * kV + i] = tag * 1000 + r;
    }
    call->inputs.block = std::move(*block);
    call->inputs.layout = layout;
    call->inputs.PointIntoBlock();
    call->method = "Forward";
    return call;
  }

  std::shared_ptr<Outcome> SubmitCall(std::unique_ptr<ForwardCall> call) {
    auto outcome = std::make_shared<Outcome>();
    call->done = [outcome](absl::StatusOr<ForwardResult> r) { outcome->promise.set_value(std::move(r)); };
    engine_->SubmitForward(std::move(call));
    return outcome;
  }

  static absl::StatusOr<ForwardResult> Get(const std::shared_ptr<Outcome>& o) {
    EXPECT_EQ(o->future.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return o->future.get();
  }

  // o of a result as floats, row by row: every value of a row must be equal.
  static std::vector<float> RowTags(const ForwardResult& r) {
    std::vector<float> o;
    for (const wire::BytesRef& run : r.o) {
      const float* x = static_cast<const float*>(run.data);
      o.insert(o.end(), x, x + run.size / sizeof(float));
    }
    std::vector<float> rows;
    for (size_t at = 0; at < o.size(); at += kHv * kV) rows.push_back(o[at]);
    return rows;
  }

  static std::vector<Op> Kernels(const std::vector<Op>& log) {
    std::vector<Op> out;
    for (const Op& op : log) {
      if (op.kind == Op::kDecode || op.kind == Op::kPrefill) out.push_back(op);
    }
    return out;
  }

  static int CountKernels(const std::vector<Op>& log) {
    return static_cast<int>(Kernels(log).size());
  }

  ServerConfig config_;
  RecordingBackend* backend_ = nullptr;
  std::unique_ptr<Engine> engine_;
};

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
