// The fixture of the engine tests (engine_test.cc, engine_regions_test.cc):
// an Engine over a RecordingBackend (recording_backend.h), calls whose v rows
// carry a tag (o = v shows where rows went), and readers of the log.
#ifndef GDN_TESTS_SERVER_ENGINE_ENGINE_FIXTURE_H_
#define GDN_TESTS_SERVER_ENGINE_ENGINE_FIXTURE_H_

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/engine.h"
#include "tests/server/engine/recording_backend.h"

namespace gdn::testing_engine {

inline constexpr int kHv = 4, kV = 64;

inline ServerConfig SmallConfig() {
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

class EngineFixture : public ::testing::Test {
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

}  // namespace gdn::testing_engine

#endif  // GDN_TESTS_SERVER_ENGINE_ENGINE_FIXTURE_H_
