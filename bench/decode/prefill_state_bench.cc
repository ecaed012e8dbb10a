// Chunked prefill time by state dtype (issue 19's target: int8 / fp8 pages
// within 5% of the fp32-state time): the same bf16 inputs, initial and final
// pages of fp32, bf16, int8 and fp8, through ChunkedPrefill::Run (the
// operator: chunk table + prep, state pass, output). CUDA events around each
// call after warm-up, median of the timed calls; inputs random (tiled from
// one block of draws), pages valid (kernels/state_page_codec.h), never zeros.
//
//   prefill_state_bench [--md=out.md] [--rows=16/32/1/32768,16/32/4/8192,...]
//                       [--states=fp32,bf16,int8,fp8] [--calls=20]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "kernels/cuda/chunked_prefill.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/dtype_convert.h"
#include "kernels/gdn_types.h"
#include "kernels/state_page_codec.h"

namespace gdn::bench {
namespace {

std::vector<std::string> SplitList(const std::string& list, char sep) {
  return absl::StrSplit(list, sep);
}

struct Row {
  int hqk, hv, n, len;
};

std::string Flag(int argc, char** argv, const std::string& name, const std::string& def) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return def;
}

template <typename T>
absl::Status Upload(void** dst, const std::vector<T>& host) {
  GDN_CUDA_RETURN_IF_ERROR(cudaMalloc(dst, host.size() * sizeof(T) + 16));
  GDN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(*dst, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

// 2^20 normal bf16 values drawn once: q, k and v are tiled from them, each
// from its own start. The time does not depend on the values, and drawing
// every element (400 M normals for the 4 x 8192 row, per state dtype) kept
// the two long rows past the bench's time limit on the device.
constexpr size_t kNoiseElements = size_t{1} << 20;

std::vector<uint16_t> DrawNoise(std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::vector<uint16_t> noise(kNoiseElements);
  for (uint16_t& x : noise) x = FloatToBf16(normal(rng));
  return noise;
}

// count elements: noise from `start` on, wrapping around.
std::vector<uint16_t> Tiled(const std::vector<uint16_t>& noise, int64_t count, size_t start) {
  std::vector<uint16_t> v(count);
  for (int64_t at = 0; at < count;) {
    const size_t from = (start + static_cast<size_t>(at)) % noise.size();
    const int64_t n = std::min<int64_t>(count - at, static_cast<int64_t>(noise.size() - from));
    std::memcpy(v.data() + at, noise.data() + from, static_cast<size_t>(n) * sizeof(uint16_t));
    at += n;
  }
  return v;
}

// Median ms per call of one (row, state dtype).
absl::StatusOr<double> TimeRow(const Row& row, StateDType st, int calls, cudaStream_t stream,
                               std::mt19937_64& rng) {
  GdnOptions options;
  options.shape = {row.hqk, row.hv, 128, 128};
  options.input_dtype = DType::kBF16;
  options.state_dtype = st;
  const int64_t T = int64_t{row.n} * row.len;
  std::normal_distribution<float> normal;
  const std::vector<uint16_t> noise = DrawNoise(rng);
  std::vector<void*> buffers;
  auto upload = [&](auto host) -> absl::StatusOr<void*> {
    void* p = nullptr;
    if (absl::Status s = Upload(&p, host); !s.ok()) return s;
    buffers.push_back(p);
    return p;
  };
  GdnParams p;
  p.num_seqs = row.n;
  p.total_tokens = static_cast<int32_t>(T);
  std::vector<int32_t> cu(row.n + 1);
  for (int i = 0; i <= row.n; ++i) cu[i] = i * row.len;
  p.cu_seqlens_host = cu.data();
  std::vector<float> g(T * row.hv), beta(T * row.hv);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = -std::log1p(std::exp(-normal(rng))) / 16.0f;
    beta[i] = 1.0f / (1.0f + std::exp(-normal(rng)));
  }
  const StatePageLayout layout = StatePageLayout::For(options.shape, st);
  std::vector<uint8_t> page(layout.page_bytes, 0);
  {
    const StatePageFormat format = StatePageFormat::For(options);
    std::vector<float> state(format.elements());
    for (float& x : state) x = 0.1f * normal(rng);
    EncodeStatePage(format, state.data(), {}, page.data());
  }
  std::vector<uint8_t> pool;
  for (int i = 0; i < 2 * row.n; ++i) pool.insert(pool.end(), page.begin(), page.end());
  std::vector<int32_t> initial(row.n), final(row.n);
  for (int i = 0; i < row.n; ++i) {
    initial[i] = i;
    final[i] = row.n + i;
  }
  absl::StatusOr<void*> ptr;
  if (!(ptr = upload(cu)).ok()) return ptr.status();
  p.cu_seqlens = static_cast<const int32_t*>(*ptr);
  if (!(ptr = upload(Tiled(noise, T * row.hqk * 128, 0))).ok()) return ptr.status();
  p.q = *ptr;
  if (!(ptr = upload(Tiled(noise, T * row.hqk * 128, 333331))).ok()) return ptr.status();
  p.k = *ptr;
  if (!(ptr = upload(Tiled(noise, T * row.hv * 128, 666661))).ok()) return ptr.status();
  p.v = *ptr;
  void* o = nullptr;  // written by the call: no host copy
  GDN_CUDA_RETURN_IF_ERROR(cudaMalloc(&o, T * row.hv * 128 * sizeof(uint16_t)));
  buffers.push_back(o);
  p.o = o;
  if (!(ptr = upload(g)).ok()) return ptr.status();
  p.g = static_cast<const float*>(*ptr);
  if (!(ptr = upload(beta)).ok()) return ptr.status();
  p.beta = static_cast<const float*>(*ptr);
  if (!(ptr = upload(initial)).ok()) return ptr.status();
  p.initial_pages = static_cast<const int32_t*>(*ptr);
  if (!(ptr = upload(final)).ok()) return ptr.status();
  p.final_pages = static_cast<const int32_t*>(*ptr);
  if (!(ptr = upload(pool)).ok()) return ptr.status();
  p.pool = {*ptr, static_cast<int64_t>(layout.page_bytes), 2 * row.n, st};

  cuda::ChunkedPrefill prefill;
  cudaEvent_t start, stop;
  GDN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  GDN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int c = 0; c < calls + 3; ++c) {
    GDN_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
    if (absl::Status s = prefill.Run(options, p, stream); !s.ok()) return s;
    GDN_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
    GDN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
    float t = 0;
    GDN_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&t, start, stop));
    if (c >= 3) ms.push_back(t);
  }
  GDN_CUDA_RETURN_IF_ERROR(cudaEventDestroy(start));
  GDN_CUDA_RETURN_IF_ERROR(cudaEventDestroy(stop));
  for (void* b : buffers) GDN_CUDA_RETURN_IF_ERROR(cudaFree(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int Main(int argc, char** argv) {
  std::vector<Row> rows;
  for (const std::string& r : SplitList(
           Flag(argc, argv, "rows", "16/32/1/32768,16/32/1/8192,16/32/4/8192,16/32/8/1024"),
           ',')) {
    Row row{};
    if (std::sscanf(r.c_str(), "%d/%d/%d/%d", &row.hqk, &row.hv, &row.n, &row.len) != 4) {
      std::fprintf(stderr, "--rows: Hqk/Hv/N/L, got '%s'\n", r.c_str());
      return 1;
    }
    rows.push_back(row);
  }
  std::vector<StateDType> states;
  for (const std::string& name : SplitList(Flag(argc, argv, "states", "fp32,bf16,int8,fp8"), ',')) {
    StateDType st;
    if (!ParseStateDType(name, &st)) return 1;
    states.push_back(st);
  }
  const int calls = std::atoi(Flag(argc, argv, "calls", "20").c_str());
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return 1;
  std::mt19937_64 rng(1);
  std::string md = "| Hqk/Hv | N x L |";
  for (StateDType st : states) md += absl::StrCat(" ", StateDTypeName(st), " ms |");
  md += " vs fp32 |\n|---|---|";
  for (size_t i = 0; i <= states.size(); ++i) md += "---|";
  md += "\n";
  for (const Row& row : rows) {
    md += absl::StrCat("| ", row.hqk, "/", row.hv, " | ", row.n, " x ", row.len, " |");
    double f32 = 0;
    std::string ratios;
    for (StateDType st : states) {
      absl::StatusOr<double> t = TimeRow(row, st, calls, stream, rng);
      if (!t.ok()) {
        std::fprintf(stderr, "%s: %s\n", std::string(StateDTypeName(st)).c_str(),
                     t.status().ToString().c_str());
        return 1;
      }
      std::printf("Hqk/Hv %d/%d %d x %d state %s: %.3f ms\n", row.hqk, row.hv, row.n, row.len,
                  std::string(StateDTypeName(st)).c_str(), *t);
      if (st == StateDType::kF32) f32 = *t;
      md += absl::StrCat(" ", absl::StrFormat("%.3f", *t), " |");
      if (f32 > 0 && st != StateDType::kF32) {
        ratios += absl::StrFormat("%s %+.1f%% ", std::string(StateDTypeName(st)).c_str(),
                                  100.0 * (*t / f32 - 1.0));
      }
    }
    md += " " + ratios + "|\n";
  }
  const std::string md_path = Flag(argc, argv, "md", "prefill_state_bench.md");
  if (FILE* f = std::fopen(md_path.c_str(), "w")) {
    std::fputs(md.c_str(), f);
    std::fclose(f);
  }
  std::fputs(md.c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace gdn::bench

int main(int argc, char** argv) { return gdn::bench::Main(argc, argv); }
