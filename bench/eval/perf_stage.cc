#include "bench/eval/perf_stage.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "kernels/dtype_convert.h"

namespace gdn::eval {
namespace {

constexpr size_t kTileBytes = 16u << 20;

enum class Values { kRandn, kDecay, kBeta, kState };

// A tile of `bytes` (a multiple of the element size) of the given kind.
std::vector<uint8_t> MakeTile(size_t bytes, size_t element_size, bool bf16, Values kind,
                              std::mt19937_64& rng) {
  std::vector<uint8_t> tile(bytes);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t off = 0; off + element_size <= bytes; off += element_size) {
    float x = normal(rng);
    switch (kind) {
      case Values::kRandn: break;
      case Values::kDecay: x = (x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x))) / 16.0f; break;
      case Values::kBeta: x = 1.0f / (1.0f + std::exp(-x)); break;
      case Values::kState: x *= 0.5f; break;
    }
    if (element_size == 4) {
      std::memcpy(&tile[off], &x, 4);
    } else {
      const uint16_t h = bf16 ? FloatToBf16(x) : FloatToHalf(x);
      std::memcpy(&tile[off], &h, 2);
    }
  }
  return tile;
}

}  // namespace

PerfStage::~PerfStage() {
  (void)backend_.Synchronize();
  for (void* p : allocations_) backend_.Free(p);
}

absl::StatusOr<void*> PerfStage::Allocate(size_t bytes) {
  absl::StatusOr<void*> ptr = backend_.Allocate(std::max<size_t>(bytes, 1));
  if (!ptr.ok()) return ptr.status();
  allocations_.push_back(*ptr);
  bytes_allocated_ += bytes;
  return *ptr;
}

absl::Status PerfStage::Fill(void* dst, size_t bytes, const std::vector<uint8_t>& tile) {
  char* base = static_cast<char*>(dst);
  const size_t first = std::min(bytes, tile.size());
  if (absl::Status st = backend_.CopyToDevice(base, tile.data(), first); !st.ok()) return st;
  for (size_t done = first; done < bytes;) {
    const size_t n = std::min(done, bytes - done);
    if (absl::Status st = backend_.CopyOnDevice(base + done, base, n); !st.ok()) return st;
    done += n;
  }
  return backend_.Synchronize();  // the tile is a temporary
}

absl::StatusOr<std::unique_ptr<PerfStage>> PerfStage::Create(
    Backend& backend, const GdnOptions& options, int batch, int length,
    bool zero_initial_state, uint64_t seed) {
  const LayerShape& s = options.shape;
  std::unique_ptr<PerfStage> stage(new PerfStage(backend, options));
  std::mt19937_64 rng(seed);
  const int64_t tokens = int64_t{batch} * length;
  const size_t esize = DTypeSize(options.input_dtype);
  const bool bf16 = options.input_dtype == DType::kBF16;
  const size_t qk_bytes = size_t(tokens) * s.num_qk_heads * s.head_dim_k * esize;
  const size_t v_bytes = size_t(tokens) * s.num_v_heads * s.head_dim_v * esize;
  const size_t gate_bytes = size_t(tokens) * s.num_v_heads * sizeof(float);
  auto tile_size = [&](size_t bytes) { return std::min(bytes, kTileBytes); };

  // Refuse up front what cannot fit, as a resource limit: the cpu backend's
  // allocations succeed lazily (overcommit) and filling them would wake the
  // OOM killer instead of failing. Budget: half of the cpu's physical memory,
  // 90% of the device memory still free on cuda.
  {
    const StatePageLayout layout = StatePageLayout::For(s, options.state_dtype);
    const double needed = 2.0 * qk_bytes + 2.0 * v_bytes + 2.0 * gate_bytes +
                          double(layout.page_bytes) * (batch + 1);
    const DeviceMemoryInfo mem = backend.MemoryInfo();
    const double limit = backend.name() == "cpu"
                             ? 0.5 * double(mem.total_bytes)
                             : 0.9 * (double(mem.total_bytes) - double(mem.used_bytes));
    if (mem.total_bytes > 0 && needed > limit) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "pre-check: needs ", needed / 1e9, " GB of backend memory, limit ", limit / 1e9, " GB"));
    }
  }
  GdnParams& p = stage->params_;
  p.num_seqs = batch;
  p.total_tokens = static_cast<int32_t>(tokens);
  for (int i = 0; i <= batch; ++i) stage->cu_host_.push_back(static_cast<int32_t>(int64_t{i} * length));
  p.cu_seqlens_host = stage->cu_host_.data();

  absl::StatusOr<void*> ptr;
  if (!(ptr = stage->Allocate(stage->cu_host_.size() * 4)).ok()) return ptr.status();
  if (absl::Status st = backend.CopyToDevice(*ptr, stage->cu_host_.data(), stage->cu_host_.size() * 4); !st.ok()) return st;
  p.cu_seqlens = static_cast<const int32_t*>(*ptr);

  auto fill_new = [&](size_t bytes, size_t element_size, Values kind) -> absl::StatusOr<void*> {
    absl::StatusOr<void*> buf = stage->Allocate(bytes);
    if (!buf.ok()) return buf.status();
    const std::vector<uint8_t> tile = MakeTile(tile_size(bytes), element_size, bf16, kind, rng);
    if (absl::Status st = stage->Fill(*buf, bytes, tile); !st.ok()) return st;
    return *buf;
  };
  if (!(ptr = fill_new(qk_bytes, esize, Values::kRandn)).ok()) return ptr.status();
  p.q = *ptr;
  if (!(ptr = fill_new(qk_bytes, esize, Values::kRandn)).ok()) return ptr.status();
  p.k = *ptr;
  if (!(ptr = fill_new(v_bytes, esize, Values::kRandn)).ok()) return ptr.status();
  p.v = *ptr;
  if (!(ptr = stage->Allocate(v_bytes)).ok()) return ptr.status();
  p.o = *ptr;
  if (!(ptr = fill_new(gate_bytes, 4, Values::kDecay)).ok()) return ptr.status();
  p.g = static_cast<const float*>(*ptr);
  if (!(ptr = fill_new(gate_bytes, 4, Values::kBeta)).ok()) return ptr.status();
  p.beta = static_cast<const float*>(*ptr);

  const StatePageLayout layout = StatePageLayout::For(s, options.state_dtype);
  const size_t pool_bytes = layout.page_bytes * (batch + 1);
  if (!(ptr = fill_new(pool_bytes, StateDTypeSize(options.state_dtype), Values::kState)).ok()) return ptr.status();
  p.pool.base = *ptr;
  p.pool.page_bytes = static_cast<int64_t>(layout.page_bytes);
  p.pool.num_pages = batch + 1;
  p.pool.dtype = options.state_dtype;
  std::vector<int32_t> own(batch), initial(batch);
  for (int i = 0; i < batch; ++i) {
    own[i] = i + 1;
    initial[i] = zero_initial_state ? kZeroStatePage : i + 1;
  }
  if (!(ptr = stage->Allocate(batch * 4)).ok()) return ptr.status();
  if (absl::Status st = backend.CopyToDevice(*ptr, initial.data(), batch * 4); !st.ok()) return st;
  p.initial_pages = static_cast<const int32_t*>(*ptr);
  if (!(ptr = stage->Allocate(batch * 4)).ok()) return ptr.status();
  if (absl::Status st = backend.CopyToDevice(*ptr, own.data(), batch * 4); !st.ok()) return st;
  p.final_pages = static_cast<const int32_t*>(*ptr);
  if (absl::Status st = backend.Synchronize(); !st.ok()) return st;
  return stage;
}

absl::StatusOr<std::vector<float>> PerfStage::OutputSample(size_t max_bytes) {
  const LayerShape& s = options_.shape;
  const size_t esize = DTypeSize(options_.input_dtype);
  const size_t all = size_t(params_.total_tokens) * s.num_v_heads * s.head_dim_v * esize;
  const size_t bytes = std::min(all, max_bytes) / esize * esize;
  std::vector<uint8_t> raw(bytes);
  absl::Status st = backend_.CopyToHost(raw.data(), params_.o, bytes);
  if (st.ok()) st = backend_.Synchronize();
  if (!st.ok()) return st;
  std::vector<float> values(bytes / esize);
  ConvertToFloat(raw.data(), options_.input_dtype, values.size(), values.data());
  return values;
}

double PerfStage::CallBytes(const GdnOptions& o, int batch, int length, bool reads_state) {
  const LayerShape& s = o.shape;
  const double tokens = double(batch) * length;
  const double esize = DTypeSize(o.input_dtype);
  const double activations = tokens * (2.0 * s.num_qk_heads * s.head_dim_k + 2.0 * s.num_v_heads * s.head_dim_v) * esize;
  const double gating = tokens * s.num_v_heads * 2 * 4.0;
  const double state = double(batch) * StatePageLayout::For(s, o.state_dtype).state_bytes * (reads_state ? 2 : 1);
  return activations + gating + state;
}

double PerfStage::CallFlops(const GdnOptions& o, int batch, int length) {
  const LayerShape& s = o.shape;
  return 7.0 * double(batch) * length * s.num_v_heads * s.head_dim_k * s.head_dim_v;
}

}  // namespace gdn::eval
