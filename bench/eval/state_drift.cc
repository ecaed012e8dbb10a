#include "bench/eval/state_drift.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/dtype_convert.h"
#include "kernels/state_page_codec.h"
#include "kernels/state_quant.h"

namespace gdn::eval {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float Bf16Round(float x) { return Bf16ToFloat(FloatToBf16(x)); }

// One step's inputs, all heads: what the kernel and the oracle both see.
struct StepInputs {
  std::vector<double> q, k;  // [H][K], normalised (q times K^-1/2)
  std::vector<float> qf, kf;  // the same in fp32
  std::vector<float> v;       // [H][V]
  std::vector<double> g, beta;
  std::vector<uint32_t> salts;  // [H]
};

// Per-head A = exp(A_log) of the qwen gating, U(0, 16), fixed per seed.
std::vector<double> QwenDecayRates(const DriftConfig& c) {
  std::mt19937_64 rng(SplitMix64(c.seed ^ 0xa11ce));
  std::uniform_real_distribution<double> uniform(0.0, 16.0);
  std::vector<double> a(c.heads);
  for (double& x : a) x = uniform(rng);
  return a;
}

void DrawStep(const DriftConfig& c, const std::vector<double>& rates, int step, StepInputs* in) {
  std::mt19937_64 rng(SplitMix64(c.seed * 0x100000001b3ull + static_cast<uint64_t>(step)));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int H = c.heads, D = c.dim;
  in->q.resize(H * D);
  in->k.resize(H * D);
  in->qf.resize(H * D);
  in->kf.resize(H * D);
  in->v.resize(H * D);
  in->g.resize(H);
  in->beta.resize(H);
  in->salts.resize(H);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int h = 0; h < H; ++h) {
    for (std::vector<double>* x : {&in->q, &in->k}) {
      double sum = 0;
      for (int i = 0; i < D; ++i) {
        const double e = Bf16Round(normal(rng));
        (*x)[h * D + i] = e;
        sum += e * e;
      }
      const double inv = 1.0 / std::sqrt(sum + kL2NormEps) * (x == &in->q ? scale : 1.0);
      for (int i = 0; i < D; ++i) (*x)[h * D + i] *= inv;
    }
    for (int i = 0; i < D; ++i) {
      in->qf[h * D + i] = static_cast<float>(in->q[h * D + i]);
      in->kf[h * D + i] = static_cast<float>(in->k[h * D + i]);
      in->v[h * D + i] = Bf16Round(normal(rng));
    }
    const float n1 = normal(rng), n2 = normal(rng);
    if (c.gating == DriftGating::kMild) {
      const float g = static_cast<float>(-std::log1p(std::exp(-double(n1))) / 16.0);
      const float beta = static_cast<float>(1.0 / (1.0 + std::exp(-double(n2))));
      in->g[h] = g;
      in->beta[h] = beta;
      in->salts[h] = quant::RoundingSalt(g, beta);
    } else {
      const double x = n1 + 1.0;  // a + dt_bias
      const double softplus = x > 20.0 ? x : std::log1p(std::exp(x));
      in->g[h] = static_cast<float>(-rates[h] * softplus);
      in->beta[h] = static_cast<float>(1.0 / (1.0 + std::exp(-double(n2))));
      in->salts[h] = quant::RoundingSalt(n1, n2);  // the raw a, b
    }
  }
}

// One token on a [H][K][V] state: T = float (the kernel) or double (oracle).
template <typename T>
void Step(const DriftConfig& c, const StepInputs& in, T* s, std::vector<T>* o) {
  const int H = c.heads, D = c.dim;
  std::vector<T> sk(D), sq(D);
  o->resize(H * D);
  for (int h = 0; h < H; ++h) {
    const T* q;
    const T* k;
    if constexpr (sizeof(T) == 4) {
      q = in.qf.data() + h * D;
      k = in.kf.data() + h * D;
    } else {
      q = in.q.data() + h * D;
      k = in.k.data() + h * D;
    }
    T* S = s + static_cast<size_t>(h) * D * D;
    std::fill(sk.begin(), sk.end(), T(0));
    std::fill(sq.begin(), sq.end(), T(0));
    T kq = 0;
    for (int i = 0; i < D; ++i) {
      kq += k[i] * q[i];
      const T* row = S + i * D;
      for (int j = 0; j < D; ++j) {
        sk[j] += row[j] * k[i];
        sq[j] += row[j] * q[i];
      }
    }
    const T decay = std::exp(static_cast<T>(in.g[h]));
    const T beta = static_cast<T>(in.beta[h]);
    T* out = o->data() + h * D;
    std::vector<T> u(D);
    for (int j = 0; j < D; ++j) {
      u[j] = beta * (static_cast<T>(in.v[h * D + j]) - decay * sk[j]);
      out[j] = decay * sq[j] + kq * u[j];
    }
    for (int i = 0; i < D; ++i) {
      T* row = S + i * D;
      for (int j = 0; j < D; ++j) row[j] = row[j] * decay + k[i] * u[j];
    }
  }
}

// The int4 residual of the error-compensation variant: r = x - stored, per
// group of `cols` columns over all rows: scale = max|r| / 7, codes -7..7
// (nearest); stored += code * scale.
void AddInt4Residual(const DriftConfig& c, int cols, const std::vector<float>& x,
                     std::vector<float>* stored) {
  const int D = c.dim;
  for (int h = 0; h < c.heads; ++h) {
    for (int c0 = 0; c0 < D; c0 += cols) {
      auto at = [&](int i, int j) { return (static_cast<size_t>(h) * D + i) * D + c0 + j; };
      float amax = 0;
      for (int i = 0; i < D; ++i) {
        for (int j = 0; j < cols; ++j) amax = std::max(amax, std::fabs(x[at(i, j)] - (*stored)[at(i, j)]));
      }
      if (!(amax >= quant::kMinGroupAmax)) continue;
      const float scale = amax / 7.0f, inv = 7.0f / amax;
      for (int i = 0; i < D; ++i) {
        for (int j = 0; j < cols; ++j) {
          const float r = x[at(i, j)] - (*stored)[at(i, j)];
          (*stored)[at(i, j)] += std::clamp(std::rint(r * inv), -7.0f, 7.0f) * scale;
        }
      }
    }
  }
}

}  // namespace

const char* DriftGatingName(DriftGating gating) {
  return gating == DriftGating::kMild ? "mild" : "qwen";
}

std::vector<DriftVariant> StandardDriftVariants() {
  std::vector<DriftVariant> out;
  for (const char* name :
       {"fp32", "bf16", "int8-nearest", "int8-stochastic", "int8-stochastic-c1",
        "int8-stochastic-c32", "int8+r4", "fp8-nearest", "fp8-stochastic", "fp8-stochastic-c1",
        "fp8-stochastic-c32", "fp8+r4"}) {
    out.push_back(*ParseDriftVariant(name));
  }
  return out;
}

absl::StatusOr<DriftVariant> ParseDriftVariant(const std::string& name) {
  DriftVariant v;
  v.name = name;
  std::string rest = name;
  const size_t plus = rest.find("+r4");
  if (plus != std::string::npos && plus + 3 == rest.size()) {
    v.residual = true;
    v.rounding = StateRounding::kStochastic;
    rest = rest.substr(0, plus);
  }
  std::vector<std::string> parts = absl::StrSplit(rest, '-');
  if (parts.empty() || !ParseStateDType(parts[0], &v.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("variant '", name, "': unknown state dtype"));
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    int cols = 0;
    if (ParseStateRounding(parts[i], &v.rounding)) continue;
    if (parts[i].size() > 1 && parts[i][0] == 'c' && absl::SimpleAtoi(parts[i].substr(1), &cols) &&
        cols >= 1 && cols <= 128 && (cols & (cols - 1)) == 0) {
      v.scale_cols = cols;
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat("variant '", name, "': bad part '", parts[i], "'"));
  }
  if (!IsQuantizedState(v.dtype) && (v.residual || parts.size() > 1)) {
    return absl::InvalidArgumentError(absl::StrCat("variant '", name, "': fp32 / bf16 take no options"));
  }
  return v;
}

std::vector<int> DriftRecordSteps(int steps) {
  std::set<int> s;
  for (int fixed : {1, 64, 1024, 8192, 65536}) {
    if (fixed <= steps) s.insert(fixed);
  }
  for (int i = 0;; ++i) {
    const int step = static_cast<int>(std::lround(std::pow(2.0, i / 24.0)));
    if (step > steps) break;
    s.insert(step);
  }
  s.insert(steps);
  return {s.begin(), s.end()};
}

std::vector<DriftPoint> RunDriftChain(const DriftConfig& c, const DriftVariant& variant) {
  const std::vector<double> rates = QwenDecayRates(c);
  const size_t n = static_cast<size_t>(c.heads) * c.dim * c.dim;
  std::vector<float> s(n, 0.0f), exact(n);
  std::vector<double> ref(n, 0.0);
  std::vector<float> o;
  std::vector<double> o_ref;
  StatePageFormat format;
  format.dtype = variant.dtype;
  format.rounding = variant.rounding;
  format.num_v_heads = c.heads;
  format.head_dim_k = c.dim;
  format.head_dim_v = c.dim;
  format.scale_cols = variant.scale_cols;
  std::vector<uint8_t> page(format.payload_bytes());
  const std::vector<int> records = DriftRecordSteps(c.steps);
  std::vector<DriftPoint> points;
  size_t next = 0;
  double window_sum = 0;
  int window_count = 0;
  int64_t nonfinite = 0;
  StepInputs in;
  for (int step = 1; step <= c.steps; ++step) {
    DrawStep(c, rates, step, &in);
    Step<float>(c, in, s.data(), &o);
    Step<double>(c, in, ref.data(), &o_ref);
    if (variant.dtype != StateDType::kF32) {
      if (variant.residual) exact = s;
      EncodeStatePage(format, s.data(), in.salts, page.data());
      DecodeStatePage(format, page.data(), s.data());
      if (variant.residual) AddInt4Residual(c, variant.scale_cols, exact, &s);
    }
    double err2 = 0, ref2 = 0, max_err = 0, max_ref = 0;
    for (size_t i = 0; i < o.size(); ++i) {
      const double d = o[i] - o_ref[i];
      nonfinite += !std::isfinite(o[i]);
      err2 += d * d;
      ref2 += o_ref[i] * o_ref[i];
      max_err = std::max(max_err, std::fabs(d));
      max_ref = std::max(max_ref, std::fabs(o_ref[i]));
    }
    const double rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
    window_sum += rel_l2;
    ++window_count;
    if (next < records.size() && records[next] == step) {
      DriftPoint p;
      p.step = step;
      p.o_rel_l2 = rel_l2;
      p.o_max_abs_rel = max_ref > 0 ? max_err / max_ref : max_err;
      p.o_rel_l2_window = window_sum / window_count;
      double se2 = 0, sr2 = 0;
      for (size_t i = 0; i < n; ++i) {
        const double d = s[i] - ref[i];
        nonfinite += !std::isfinite(s[i]);
        se2 += d * d;
        sr2 += ref[i] * ref[i];
      }
      p.state_rel_l2 = sr2 > 0 ? std::sqrt(se2 / sr2) : std::sqrt(se2);
      p.nonfinite = nonfinite;
      points.push_back(p);
      window_sum = 0;
      window_count = 0;
      ++next;
    }
  }
  return points;
}

DecayMemory DriftDecayMemory(const DriftConfig& c) {
  // Mean g per head over a sample of steps.
  const std::vector<double> rates = QwenDecayRates(c);
  std::vector<double> sum(c.heads, 0.0);
  const int sample = std::min(c.steps, 4096);
  StepInputs in;
  for (int step = 1; step <= sample; ++step) {
    DrawStep(c, rates, step, &in);
    for (int h = 0; h < c.heads; ++h) sum[h] += in.g[h];
  }
  DecayMemory m;
  for (int h = 0; h < c.heads; ++h) {
    const double steps = 1.0 / (1.0 - std::exp(sum[h] / sample));
    m.mean_steps += steps / c.heads;
    m.longest_steps = std::max(m.longest_steps, steps);
  }
  return m;
}

}  // namespace gdn::eval
