#include "kernels/testing/gdn_test_inputs.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <cmath>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "kernels/dtype_convert.h"
#include "kernels/state_page_codec.h"

namespace gdn::testing {
namespace {

// Magnitude of a random initial state's entries: a state that has absorbed
// many unit-norm-k / randn-v writes reads back S^T k of order |v| ~ 1.
constexpr float kInitialStateStddev = 0.5f;

// Saturates softplus / sigmoid in fp32: expf(-200) == 0 and expf(200) == Inf,
// so softplus(-200) == 0, sigmoid(-200) == 0 and sigmoid(200) == 1 exactly.
constexpr float kSaturating = 200.0f;

// How the values are drawn, deterministically and in parallel: every tensor
// (a "stream" below) is cut into blocks of about kBlockValues values, and
// every block is drawn, in order, from its own engine seeded from (seed,
// stream, block index). A value thus depends only on the seed, the shapes and
// its position, never on which thread drew its block or how many threads
// there are. Tensors above kParallelValues values spread their blocks over
// std::thread workers; smaller ones draw the same blocks serially.
constexpr int64_t kBlockValues = int64_t{1} << 16;
constexpr int64_t kParallelValues = int64_t{1} << 20;

// One stream per tensor (the initial states of all sequences are one).
enum Stream : uint64_t {
  kStreamQ = 1,
  kStreamK,
  kStreamV,
  kStreamGating,       // g, beta or a, b: [T, Hv]
  kStreamHeadParams,   // A_log, dt_bias: [Hv]
  kStreamInitialStates,
};

// SplitMix64's finaliser: a bijection of uint64 that scatters nearby inputs.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t BlockSeed(uint64_t seed, uint64_t stream, uint64_t block) {
  return SplitMix64(SplitMix64(SplitMix64(seed) ^ stream) ^ block);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  float Normal() { return normal_(engine_); }
  float Uniform(float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(engine_);
  }

 private:
  std::mt19937_64 engine_;
  std::normal_distribution<float> normal_{0.0f, 1.0f};
};

// Calls fill(rng, begin, end) once per block of [0, n), with the block's own
// Rng. Blocks hold whole rows of `row` values (about kBlockValues values per
// block), so that per-row work (the L2 norm) stays inside one block. `fill`
// must write only values [begin, end) of its tensor.
template <typename Fill>
void FillBlocks(uint64_t seed, Stream stream, int64_t n, int64_t row,
                const Fill& fill) {
  const int64_t block = std::max<int64_t>(1, kBlockValues / row) * row;
  const int64_t blocks = (n + block - 1) / block;
  const int64_t threads =
      n > kParallelValues
          ? std::min<int64_t>(blocks,
                              std::max(1u, std::thread::hardware_concurrency()))
          : 1;
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t b = next++; b < blocks; b = next++) {
      Rng rng(BlockSeed(seed, stream, b));
      fill(rng, b * block, std::min(n, (b + 1) * block));
    }
  };
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

float LogSigmoid(float x) {  // stable: -softplus(-x)
  return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}
float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// [rows, dim] randn, optionally with each row scaled to unit L2 norm, then
// rounded to `dtype`.
std::vector<float> RandnRows(uint64_t seed, Stream stream, int64_t rows,
                             int64_t dim, bool unit_norm, DType dtype) {
  std::vector<float> x(rows * dim);
  FillBlocks(seed, stream, rows * dim, dim,
             [&](Rng& rng, int64_t begin, int64_t end) {
               for (int64_t i = begin; i < end; ++i) x[i] = rng.Normal();
               if (unit_norm) {  // [begin, end) is whole rows
                 for (int64_t r = begin; r < end; r += dim) {
                   double sum = 0;
                   for (int64_t i = r; i < r + dim; ++i) sum += double(x[i]) * x[i];
                   const float inv = static_cast<float>(1.0 / std::sqrt(sum));
                   for (int64_t i = r; i < r + dim; ++i) x[i] *= inv;
                 }
               }
               RoundThrough(dtype, x.data() + begin, end - begin);
             });
  return x;
}

void MakeDirectGating(uint64_t seed, GateProfile profile, int64_t n,
                      oracle::Inputs* in) {
  in->g.resize(n);
  in->beta.resize(n);
  FillBlocks(seed, kStreamGating, n, 1, [&](Rng& rng, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float g = LogSigmoid(rng.Normal()) / 16.0f;
      float beta = Sigmoid(rng.Normal());
      switch (profile) {
        case GateProfile::kRandom: break;
        case GateProfile::kNoDecay: g = 0.0f; break;
        case GateProfile::kStrongDecay: g = -rng.Uniform(5.0f, 20.0f); break;
        case GateProfile::kBetaZero: beta = 0.0f; break;
        case GateProfile::kBetaOne: beta = 1.0f; break;
      }
      in->g[i] = g;
      in->beta[i] = beta;
    }
  });
}

// g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b). In the random
// profile exp(A_log) ~ 0.5..2 and a + dt_bias ~ -3 + randn give g around
// -0.05 like logsigmoid(randn)/16.
void MakeFusedGating(uint64_t seed, GateProfile profile, int64_t tokens,
                     int64_t hv, oracle::Inputs* in) {
  const bool strong = profile == GateProfile::kStrongDecay;
  in->A_log.resize(hv);
  in->dt_bias.resize(hv);
  FillBlocks(seed, kStreamHeadParams, hv, 1, [&](Rng& rng, int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) {
      in->A_log[h] = strong ? std::log(rng.Uniform(5.0f, 10.0f))
                            : std::log(rng.Uniform(0.5f, 2.0f));
      in->dt_bias[h] = rng.Uniform(-4.0f, -2.0f);
    }
  });
  in->a.resize(tokens * hv);
  in->b.resize(tokens * hv);
  const int64_t n = tokens * hv;
  FillBlocks(seed, kStreamGating, n, 1, [&](Rng& rng, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {  // i = t * hv + h
      const int64_t h = i % hv;
      float a = rng.Normal();
      float b = rng.Normal();
      switch (profile) {
        case GateProfile::kRandom: break;
        case GateProfile::kNoDecay: a = -kSaturating; break;
        // softplus(1..2) ~ 1.3..2.1, times exp(A_log) 5..10: g ~ -6.5..-21.
        case GateProfile::kStrongDecay:
          a = rng.Uniform(1.0f, 2.0f) - in->dt_bias[h];
          break;
        case GateProfile::kBetaZero: b = -kSaturating; break;
        case GateProfile::kBetaOne: b = kSaturating; break;
      }
      in->a[i] = a;
      in->b[i] = b;
    }
  });
}

}  // namespace

const char* GateProfileName(GateProfile profile) {
  switch (profile) {
    case GateProfile::kRandom: return "random";
    case GateProfile::kNoDecay: return "no_decay";
    case GateProfile::kStrongDecay: return "strong_decay";
    case GateProfile::kBetaZero: return "beta_zero";
    case GateProfile::kBetaOne: return "beta_one";
  }
  return "unknown";
}

void RoundThroughState(StateDType dtype, std::vector<float>* values) {
  if (IsQuantizedState(dtype)) {
    std::fprintf(stderr, "RoundThroughState(%s): needs the shape (the GdnOptions overload)\n",
                 std::string(StateDTypeName(dtype)).c_str());
    std::abort();
  }
  if (dtype == StateDType::kBF16) {
    for (float& v : *values) v = Bf16ToFloat(FloatToBf16(v));
  }
}

void RoundThroughState(const GdnOptions& options, std::vector<float>* state) {
  StatePageFormat format = StatePageFormat::For(options);
  format.rounding = StateRounding::kNearest;
  RoundTripState(format, {}, state);
}

std::vector<float> ToFloat(const std::vector<double>& values) {
  return std::vector<float>(values.begin(), values.end());
}

namespace {

// Appends rows [begin, end) of a [T, width] tensor (nothing if it is empty).
void AppendRows(const std::vector<float>& src, int64_t width, int64_t begin,
                int64_t end, std::vector<float>* dst) {
  if (src.empty()) return;
  dst->insert(dst->end(), src.begin() + begin * width, src.begin() + end * width);
}

}  // namespace

oracle::Inputs SliceSequence(const GdnOptions& options,
                             const oracle::Inputs& in, int seq, int begin,
                             int end, std::vector<float> initial_state) {
  const LayerShape& s = options.shape;
  const int64_t t0 = in.cu_seqlens[seq] + begin;
  const int64_t t1 = in.cu_seqlens[seq] + end;
  oracle::Inputs out;
  out.cu_seqlens = {0, static_cast<int32_t>(end - begin)};
  AppendRows(in.q, int64_t{s.num_qk_heads} * s.head_dim_k, t0, t1, &out.q);
  AppendRows(in.k, int64_t{s.num_qk_heads} * s.head_dim_k, t0, t1, &out.k);
  AppendRows(in.v, int64_t{s.num_v_heads} * s.head_dim_v, t0, t1, &out.v);
  AppendRows(in.g, s.num_v_heads, t0, t1, &out.g);
  AppendRows(in.beta, s.num_v_heads, t0, t1, &out.beta);
  AppendRows(in.a, s.num_v_heads, t0, t1, &out.a);
  AppendRows(in.b, s.num_v_heads, t0, t1, &out.b);
  out.A_log = in.A_log;
  out.dt_bias = in.dt_bias;
  out.initial_states = {std::move(initial_state)};
  return out;
}

oracle::Inputs ConcatSequences(const std::vector<oracle::Inputs>& parts) {
  oracle::Inputs out;
  out.cu_seqlens = {0};
  for (const oracle::Inputs& part : parts) {
    for (size_t i = 1; i < part.cu_seqlens.size(); ++i) {
      out.cu_seqlens.push_back(out.cu_seqlens.back() + part.cu_seqlens[i] -
                               part.cu_seqlens[i - 1]);
    }
    for (auto [src, dst] : {std::pair{&part.q, &out.q}, {&part.k, &out.k},
                            {&part.v, &out.v}, {&part.g, &out.g},
                            {&part.beta, &out.beta}, {&part.a, &out.a},
                            {&part.b, &out.b}}) {
      dst->insert(dst->end(), src->begin(), src->end());
    }
    out.initial_states.insert(out.initial_states.end(),
                              part.initial_states.begin(),
                              part.initial_states.end());
    // Per-head parameters are the layer's: the same in every part.
    if (!part.A_log.empty()) out.A_log = part.A_log;
    if (!part.dt_bias.empty()) out.dt_bias = part.dt_bias;
  }
  return out;
}

std::vector<std::vector<std::vector<double>>> OracleCheckpointStates(
    const GdnOptions& options, const oracle::Inputs& inputs, int32_t interval) {
  std::vector<oracle::Inputs> prefixes;
  std::vector<std::vector<std::vector<double>>> out(inputs.num_seqs());
  for (int i = 0; i < inputs.num_seqs(); ++i) {
    const int32_t len = inputs.cu_seqlens[i + 1] - inputs.cu_seqlens[i];
    for (int32_t m = 1; m <= CheckpointCount(len, interval); ++m) {
      prefixes.push_back(SliceSequence(options, inputs, i, 0, m * interval,
                                       inputs.initial_states[i]));
    }
  }
  if (prefixes.empty()) return out;
  oracle::Outputs ref = oracle::Run(options, ConcatSequences(prefixes));
  size_t next = 0;
  for (int i = 0; i < inputs.num_seqs(); ++i) {
    const int32_t len = inputs.cu_seqlens[i + 1] - inputs.cu_seqlens[i];
    for (int32_t m = 1; m <= CheckpointCount(len, interval); ++m) {
      out[i].push_back(std::move(ref.final_states[next++]));
    }
  }
  return out;
}

absl::StatusOr<ErrorStats> CompareCheckpointStates(
    const std::vector<std::vector<std::vector<float>>>& got,
    const std::vector<std::vector<std::vector<double>>>& want) {
  if (got.size() != want.size()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint states of ", got.size(),
                                                   " sequences, want ", want.size()));
  }
  ErrorStats worst;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i].size() != want[i].size()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": ", got[i].size(),
                                                     " checkpoint states, want ", want[i].size()));
    }
    for (size_t m = 0; m < want[i].size(); ++m) {
      if (got[i][m].empty()) continue;  // a skipped slot
      if (got[i][m].size() != want[i][m].size()) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", i, " checkpoint ", m + 1,
                                                       ": wrong size"));
      }
      const ErrorStats e = Compare(got[i][m].data(), want[i][m].data(), want[i][m].size());
      worst.max_abs_rel = std::max(worst.max_abs_rel, e.max_abs_rel);
      worst.rel_l2 = std::max(worst.rel_l2, e.rel_l2);
      worst.nonfinite += e.nonfinite;
    }
  }
  return worst;
}

void SetQkRowMagnitudes(const GdnOptions& options,
                        const std::vector<float>& q_max,
                        const std::vector<float>& k_max,
                        oracle::Inputs* inputs) {
  const int64_t dim = options.shape.head_dim_k;
  auto rescale = [&](const std::vector<float>& targets, std::vector<float>* x) {
    if (targets.empty()) return;
    for (int64_t r = 0; r * dim < static_cast<int64_t>(x->size()); ++r) {
      const double target = targets[r % targets.size()];
      float* row = x->data() + r * dim;
      double max_abs = 0;
      for (int64_t i = 0; i < dim; ++i) max_abs = std::max(max_abs, double(std::fabs(row[i])));
      if (target == 0 || max_abs == 0) continue;
      // In float64: target / max_abs itself may not fit in fp32 (1e-30 / 3).
      for (int64_t i = 0; i < dim; ++i) row[i] = static_cast<float>(row[i] * (target / max_abs));
      RoundThrough(options.input_dtype, row, dim);
    }
  };
  rescale(q_max, &inputs->q);
  rescale(k_max, &inputs->k);
}

oracle::Inputs MakeRandomInputs(const GdnOptions& options,
                                const std::vector<int>& seq_lens, uint64_t seed,
                                bool random_initial_state,
                                GateProfile profile) {
  const LayerShape& s = options.shape;
  oracle::Inputs in;
  in.cu_seqlens.push_back(0);
  for (int len : seq_lens) in.cu_seqlens.push_back(in.cu_seqlens.back() + len);
  const int64_t tokens = in.total_tokens();

  // Raw randn when the kernel normalises, unit rows when it does not.
  const bool unit = !options.l2_norm_qk;
  in.q = RandnRows(seed, kStreamQ, tokens * s.num_qk_heads, s.head_dim_k, unit,
                   options.input_dtype);
  in.k = RandnRows(seed, kStreamK, tokens * s.num_qk_heads, s.head_dim_k, unit,
                   options.input_dtype);
  in.v = RandnRows(seed, kStreamV, tokens * s.num_v_heads, s.head_dim_v, false,
                   options.input_dtype);

  if (options.gating == GatingMode::kDirect) {
    MakeDirectGating(seed, profile, tokens * s.num_v_heads, &in);
  } else {
    MakeFusedGating(seed, profile, tokens, s.num_v_heads, &in);
  }

  in.initial_states.resize(seq_lens.size());
  if (random_initial_state) {
    // One stream over all sequences' states, [N, Hv * K * V].
    const int64_t state_size =
        int64_t{s.num_v_heads} * s.head_dim_k * s.head_dim_v;
    for (auto& state : in.initial_states) state.resize(state_size);
    FillBlocks(seed, kStreamInitialStates,
               static_cast<int64_t>(seq_lens.size()) * state_size, 1,
               [&](Rng& rng, int64_t begin, int64_t end) {
                 for (int64_t i = begin; i < end; ++i) {
                   in.initial_states[i / state_size][i % state_size] =
                       kInitialStateStddev * rng.Normal();
                 }
               });
    for (auto& state : in.initial_states) {
      RoundThroughState(options, &state);
    }
  }
  return in;
}

}  // namespace gdn::testing
