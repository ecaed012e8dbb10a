// Time per call of the cpu backend at the server's default shape (Qwen3-Next
// TP1: Hqk 16, Hv 32, K = V = 128, bf16 activations). The state pool is
// updated in place call after call, like a server's decode loop.
//
//   gdn_cpu_bench [--benchmark_filter=Decode] [--threads=N via GDN_CPU_THREADS]
#include <cstdlib>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/gdn_test_inputs.h"

namespace gdn {
namespace {

int Threads() {
  const char* env = std::getenv("GDN_CPU_THREADS");
  return env != nullptr ? std::atoi(env) : 0;
}

GdnOptions DefaultOptions(StateDType state) {
  GdnOptions options;  // Hqk 16, Hv 32, K = V = 128, bf16 in
  options.state_dtype = state;
  return options;
}

// args: sequences, tokens per sequence, state dtype (0 fp32, 1 bf16)
void RunCalls(benchmark::State& bench_state, testing::EntryPoint entry) {
  const int seqs = static_cast<int>(bench_state.range(0));
  const int tokens = static_cast<int>(bench_state.range(1));
  const StateDType state_dtype =
      bench_state.range(2) == 0 ? StateDType::kF32 : StateDType::kBF16;
  const GdnOptions options = DefaultOptions(state_dtype);
  std::unique_ptr<Backend> backend = CreateCpuBackend(Threads());
  const oracle::Inputs inputs = testing::MakeRandomInputs(
      options, std::vector<int>(seqs, tokens), /*seed=*/7,
      /*random_initial_state=*/true);
  auto call = testing::StagedCall::Create(*backend, options, inputs);
  if (!call.ok()) {
    bench_state.SkipWithError(call.status().ToString().c_str());
    return;
  }
  GdnParams& params = (*call)->params();
  // Every sequence in place on its own page, so calls chain like decode steps.
  std::vector<int32_t> pages((*call)->initial_pages().size());
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = 2 * static_cast<int32_t>(i) + 1;
  if (!(*call)->SetPages(pages, pages).ok()) {
    bench_state.SkipWithError("SetPages failed");
    return;
  }
  for (auto _ : bench_state) {
    const absl::Status st = entry == testing::EntryPoint::kDecode
                                ? backend->Decode(options, params)
                                : backend->Prefill(options, params);
    if (!st.ok()) {
      bench_state.SkipWithError(st.ToString().c_str());
      return;
    }
  }
  const double state_bytes = static_cast<double>(
      StatePageLayout::For(options.shape, state_dtype).state_bytes);
  bench_state.counters["tokens/s"] = benchmark::Counter(
      double(seqs) * tokens, benchmark::Counter::kIsIterationInvariantRate);
  // State read + write per call (what bounds decode).
  bench_state.counters["state_bytes/s"] = benchmark::Counter(
      2.0 * seqs * state_bytes, benchmark::Counter::kIsIterationInvariantRate);
  bench_state.SetLabel(backend->device_description());
}

void BM_Decode(benchmark::State& state) {
  RunCalls(state, testing::EntryPoint::kDecode);
}
void BM_Prefill(benchmark::State& state) {
  RunCalls(state, testing::EntryPoint::kPrefill);
}

BENCHMARK(BM_Decode)
    ->ArgNames({"batch", "tokens", "bf16_state"})
    ->Args({1, 1, 0})
    ->Args({32, 1, 0})
    ->Args({32, 1, 1})
    ->Args({32, 4, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Prefill)
    ->ArgNames({"seqs", "tokens", "bf16_state"})
    ->Args({1, 4096, 0})
    ->Args({8, 512, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace gdn

BENCHMARK_MAIN();
