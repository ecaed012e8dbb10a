// The engine's own cost per Forward call, without gRPC or kernels: an
// Engine over the cpu backend with --diagnostic_no_compute (admission,
// integer slots, planning, the lane's bookkeeping, commit and delivery all
// run; no kernel, no o written), driven by one caller in a closed loop as a
// model runner drives the server: every layer of a decode step for the same
// sessions, the next call submitted when the last one is done. Prints the
// time from SubmitForward to the call's completion callback per call size.
//
//   engine_call_bench [--sessions=1,32,256] [--steps=200] [--layers=4]
//
// Default shape (Hqk 16, Hv 32, K = V = 128, bf16, fp32 state). The inputs
// are an arena block of the call's size, never read (no compute). First it
// prints what one read of absl::Now() and of the state cache's CoarseNow()
// costs on this host (the cache stamps a session twice per sequence).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/eval/eval_stats.h"
#include "server/engine/engine.h"
#include "state_cache/state_cache.h"

ABSL_FLAG(std::string, sessions, "1,32,256", "sessions per call, one run each");
ABSL_FLAG(int, steps, 200, "decode steps per run (each over every layer); the first 10 untimed");
ABSL_FLAG(int, layers, 4, "layers per step");

namespace gdn {
namespace {

template <typename Clock>
double NanosPerRead(Clock clock) {
  constexpr int kReads = 1000000;
  int64_t sum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kReads; ++i) sum += absl::ToUnixNanos(clock());
  const auto t1 = std::chrono::steady_clock::now();
  if (sum == 42) std::printf(" ");  // keeps the reads
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / kReads;
}

int Run(int sessions, int steps, int layers) {
  ServerConfig config;
  config.num_layers = layers;
  config.backend.kind = BackendKind::kCpu;
  config.diagnostic_no_compute = true;
  config.options.shape = {16, 32, 128, 128};
  config.options.input_dtype = DType::kBF16;
  // One 2 MiB fp32 page per (session, layer), written once: room for all.
  config.device_state_budget_bytes = size_t(sessions) * layers * (2 << 20) + (64 << 20);
  config.host_state_budget_bytes = 64 << 20;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(config.backend);
  if (!backend.ok()) {
    std::fprintf(stderr, "%s\n", backend.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Engine>> created =
      Engine::Create(config, std::move(*backend), nullptr);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 1;
  }
  Engine& engine = **created;
  std::vector<std::string> ids;
  for (int i = 0; i < sessions; ++i) ids.push_back(absl::StrCat("bench-session-", i));
  std::promise<absl::Status> made;
  engine.RunSessionCommand("", [&](StateCache& cache) {
    absl::Status s;
    for (const std::string& id : ids) {
      if (s.ok()) s = cache.CreateSession(id);
    }
    made.set_value(s);
  });
  if (absl::Status s = made.get_future().get(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const InputLayout layout = InputLayout::For(config.options.shape, DType::kBF16, sessions);
  std::vector<double> us;
  for (int step = 0; step < steps; ++step) {
    for (int layer = 0; layer < layers; ++layer) {
      auto call = std::make_unique<ForwardCall>();
      call->layer = layer;
      for (int i = 0; i < sessions; ++i) call->sequences.push_back({ids[i], step, 1, i});
      call->total_tokens = sessions;
      absl::StatusOr<std::shared_ptr<IoBlock>> block = engine.arena().Acquire(layout.bytes);
      if (!block.ok()) return 1;
      call->inputs.block = std::move(*block);
      call->inputs.layout = layout;
      call->inputs.PointIntoBlock();
      call->method = "Forward";
      std::promise<absl::Status> done;
      call->done = [&done](absl::StatusOr<ForwardResult> r) { done.set_value(r.status()); };
      const auto t0 = std::chrono::steady_clock::now();
      engine.SubmitForward(std::move(call));
      const absl::Status s = done.get_future().get();
      const auto t1 = std::chrono::steady_clock::now();
      if (!s.ok()) {
        std::fprintf(stderr, "step %d layer %d: %s\n", step, layer, s.ToString().c_str());
        return 1;
      }
      if (step >= 10) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  const eval::Summary s = eval::Summarize(std::move(us));
  std::printf("sessions %4d: submit -> done p50 %7.1f us  p99 %7.1f us  (%.2f us per sequence)\n",
              sessions, s.p50, s.p99, s.p50 / sessions);
  return 0;
}

}  // namespace
}  // namespace gdn

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int steps = absl::GetFlag(FLAGS_steps);
  const int layers = absl::GetFlag(FLAGS_layers);
  std::printf("one clock read: absl::Now() %.1f ns, CoarseNow() %.1f ns\n",
              gdn::NanosPerRead([] { return absl::Now(); }), gdn::NanosPerRead(gdn::CoarseNow));
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sessions), ',')) {
    if (int rc = gdn::Run(std::atoi(std::string(s).c_str()), steps, layers); rc != 0) return rc;
  }
  return 0;
}
