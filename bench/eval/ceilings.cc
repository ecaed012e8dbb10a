#include "bench/eval/ceilings.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/eval/eval_stats.h"

namespace gdn::eval {
namespace {

using Clock = std::chrono::steady_clock;

// 8 independent accumulator vectors of 8 floats: enough FMAs in flight to
// cover the FMA latency on current x86 cores. acc = acc * a + b, compiled to
// one vfmadd per vector with -ffp-contract=fast (set on this file). Returns
// a value that depends on every accumulator so nothing is optimised out.
typedef float V8 __attribute__((vector_size(32)));

template <typename Vec>
__attribute__((always_inline)) inline float FmaLoop(int64_t iterations) {
  Vec acc[8];
  Vec a, b;
  for (int l = 0; l < int(sizeof(Vec) / 4); ++l) {
    a[l] = 0.999999f;
    b[l] = 1e-7f * (l + 1);
  }
  for (int i = 0; i < 8; ++i) acc[i] = a * float(i + 1);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < 8; ++i) acc[i] = acc[i] * a + b;
  }
  float sum = 0;
  for (int i = 0; i < 8; ++i) {
    for (int l = 0; l < int(sizeof(Vec) / 4); ++l) sum += acc[i][l];
  }
  return sum;
}

__attribute__((target("avx2,fma"))) float FmaLoopAvx2(int64_t iterations) {
  return FmaLoop<V8>(iterations);
}

typedef float V4 __attribute__((vector_size(16)));
float FmaLoopGeneric(int64_t iterations) { return FmaLoop<V4>(iterations); }

}  // namespace

absl::StatusOr<CopyCeiling> MeasureCopyCeiling(Backend& backend, int64_t bytes, int runs) {
  absl::StatusOr<void*> src = backend.Allocate(bytes);
  if (!src.ok()) return src.status();
  absl::StatusOr<void*> dst = backend.Allocate(bytes);
  if (!dst.ok()) {
    backend.Free(*src);
    return dst.status();
  }
  // Touch the source once (random-ish bytes through a host tile) so pages are
  // real on the cpu backend; the destination is touched by the warm-up copy.
  std::vector<uint8_t> tile(std::min<int64_t>(bytes, 1 << 20));
  for (size_t i = 0; i < tile.size(); ++i) tile[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  absl::Status st;
  for (int64_t off = 0; st.ok() && off < bytes; off += tile.size()) {
    st = backend.CopyToDevice(static_cast<char*>(*src) + off, tile.data(),
                              std::min<int64_t>(tile.size(), bytes - off));
  }
  if (st.ok()) st = backend.Synchronize();
  std::vector<double> times;
  for (int r = -1; st.ok() && r < runs; ++r) {  // r = -1: warm-up
    const Clock::time_point start = Clock::now();
    st = backend.CopyOnDevice(*dst, *src, bytes);
    if (st.ok()) st = backend.Synchronize();
    if (r >= 0) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  backend.Free(*dst);
  backend.Free(*src);
  if (!st.ok()) return st;
  CopyCeiling c;
  c.bytes = bytes;
  c.runs = runs;
  c.seconds_p50 = Summarize(times).p50;
  c.bytes_per_s = c.seconds_p50 > 0 ? 2.0 * bytes / c.seconds_p50 : 0;
  return c;
}

FmaCeiling MeasureCpuFmaCeiling(int threads, double seconds) {
  FmaCeiling c;
  c.threads = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  __builtin_cpu_init();
  c.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const int lanes = c.avx2_fma ? 8 : 4;
  auto run = [&](int64_t iterations) {
    return c.avx2_fma ? FmaLoopAvx2(iterations) : FmaLoopGeneric(iterations);
  };
  // Calibrate on one thread to ~seconds / 4, then run all threads.
  int64_t iterations = 1 << 16;
  for (;;) {
    const Clock::time_point start = Clock::now();
    volatile float sink = run(iterations);
    (void)sink;
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    if (t > seconds / 4 || iterations > (int64_t{1} << 40)) {
      iterations = static_cast<int64_t>(iterations * (seconds / std::max(t, 1e-9)));
      break;
    }
    iterations *= 4;
  }
  std::vector<std::thread> pool;
  std::atomic<float> sink{0};
  const Clock::time_point start = Clock::now();
  for (int t = 0; t < c.threads; ++t) {
    pool.emplace_back([&] {
      const float r = run(iterations);
      float old = sink.load();
      while (!sink.compare_exchange_weak(old, old + r)) {
      }
    });
  }
  for (auto& t : pool) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  // 8 accumulators x lanes x 2 FLOPs (multiply + add) per iteration.
  c.flops_per_s = elapsed > 0 ? double(c.threads) * iterations * 8 * lanes * 2 / elapsed : 0;
  return c;
}

}  // namespace gdn::eval
