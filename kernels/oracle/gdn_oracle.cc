#include "kernels/oracle/gdn_oracle.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/gdn_types.h"

namespace gdn::oracle {
namespace {

struct Dims {
  int64_t n, t, hqk, hv, k, v;
};

absl::Status CheckSize(const char* name, size_t got, int64_t want) {
  if (static_cast<int64_t>(got) == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("oracle: ", name, " has ", got, " values, expected ", want));
}

absl::StatusOr<Dims> CheckInputs(const GdnOptions& options,
                                 const Inputs& in) {
  const LayerShape& s = options.shape;
  if (s.num_qk_heads < 1 || s.num_v_heads < 1 ||
      s.num_v_heads % s.num_qk_heads != 0 || s.head_dim_k < 1 ||
      s.head_dim_v < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("oracle: bad shape ", DescribeOptions(options)));
  }
  if (in.cu_seqlens.size() < 2 || in.cu_seqlens[0] != 0) {
    return absl::InvalidArgumentError(
        "oracle: cu_seqlens must have N + 1 >= 2 entries starting at 0");
  }
  for (size_t i = 1; i < in.cu_seqlens.size(); ++i) {
    if (in.cu_seqlens[i] < in.cu_seqlens[i - 1]) {
      return absl::InvalidArgumentError("oracle: cu_seqlens must not decrease");
    }
  }
  Dims d{in.num_seqs(), in.total_tokens(), s.num_qk_heads, s.num_v_heads,
         s.head_dim_k, s.head_dim_v};
  absl::Status st;
  if (!(st = CheckSize("q", in.q.size(), d.t * d.hqk * d.k)).ok()) return st;
  if (!(st = CheckSize("k", in.k.size(), d.t * d.hqk * d.k)).ok()) return st;
  if (!(st = CheckSize("v", in.v.size(), d.t * d.hv * d.v)).ok()) return st;
  if (options.gating == GatingMode::kDirect) {
    if (!(st = CheckSize("g", in.g.size(), d.t * d.hv)).ok()) return st;
    if (!(st = CheckSize("beta", in.beta.size(), d.t * d.hv)).ok()) return st;
  } else {
    if (!(st = CheckSize("a", in.a.size(), d.t * d.hv)).ok()) return st;
    if (!(st = CheckSize("b", in.b.size(), d.t * d.hv)).ok()) return st;
    if (!(st = CheckSize("A_log", in.A_log.size(), d.hv)).ok()) return st;
    if (!(st = CheckSize("dt_bias", in.dt_bias.size(), d.hv)).ok()) return st;
  }
  if (!(st = CheckSize("initial_states", in.initial_states.size(), d.n)).ok()) {
    return st;
  }
  for (const auto& state : in.initial_states) {
    if (!state.empty() &&
        !(st = CheckSize("initial_states[i]", state.size(), d.hv * d.k * d.v))
             .ok()) {
      return st;
    }
  }
  return d;
}

// x / sqrt(sum(x^2) + eps), in place, float64.
void L2Normalize(std::vector<double>* x) {
  double sum = 0;
  for (double e : *x) sum += e * e;
  const double inv = 1.0 / std::sqrt(sum + static_cast<double>(kL2NormEps));
  for (double& e : *x) e *= inv;
}

// The two passes over one [K, V] state (V fastest) that each token makes,
// fused from the recurrence's four (decay; S^T k; rank-1 update; read). Each
// state and output element sees the same operations in the same order as
// with four separate passes, so results are bitwise those of the plain
// recurrence; only the traffic over the state halves.
//
// Vectorisation over V at -O2 (GCC's "very cheap" cost model, which takes no
// loop that needs a runtime alias check or a scalar tail): the arrays never
// overlap (__restrict; noinline because, inlined into run_pair, GCC 12 no
// longer vectorises them), and each row's loop runs first over the largest
// multiple of 8 of V (8 suits any vector width of doubles), then over the
// rest. The split changes no element's arithmetic.
inline int64_t VectorPart(int64_t n) { return n & ~int64_t{7}; }

// Pass 1: S = decay S, then kv = S^T k (kv[j] summed over rows i in order).
__attribute__((noinline)) void DecayAndReadK(double* __restrict s, double decay,
                                             const double* __restrict k,
                                             double* __restrict kv, int64_t dk,
                                             int64_t dv) {
  const int64_t dv8 = VectorPart(dv);
  for (int64_t j = 0; j < dv; ++j) kv[j] = 0;
  for (int64_t i = 0; i < dk; ++i) {
    double* row = s + i * dv;
    const double ki = k[i];
    for (int64_t j = 0; j < dv8; ++j) {
      row[j] *= decay;
      kv[j] += row[j] * ki;
    }
    for (int64_t j = dv8; j < dv; ++j) {
      row[j] *= decay;
      kv[j] += row[j] * ki;
    }
  }
}

// Pass 2: S = S + k u^T, then o += S^T (scale q) (o[j] summed over rows i in
// order, onto o's incoming zeros).
__attribute__((noinline)) void UpdateAndReadQ(double* __restrict s,
                                              const double* __restrict k,
                                              const double* __restrict u,
                                              const double* __restrict q,
                                              double scale,
                                              double* __restrict o, int64_t dk,
                                              int64_t dv) {
  const int64_t dv8 = VectorPart(dv);
  for (int64_t i = 0; i < dk; ++i) {
    double* row = s + i * dv;
    const double ki = k[i];
    const double qi = scale * q[i];
    for (int64_t j = 0; j < dv8; ++j) {
      row[j] += ki * u[j];
      o[j] += row[j] * qi;
    }
    for (int64_t j = dv8; j < dv; ++j) {
      row[j] += ki * u[j];
      o[j] += row[j] * qi;
    }
  }
}

}  // namespace

double FusedDecay(double a, double A_log, double dt_bias) {
  const double x = a + dt_bias;
  const double softplus = x > 20.0 ? x : std::log1p(std::exp(x));
  const double decay_rate = std::exp(A_log);
  if (std::isfinite(decay_rate) && softplus > 0.0) return -decay_rate * softplus;
  // Past float64's exp range (A_log > 709, x < -745) the product is inf * 0
  // = NaN; in log space it is the same value (softplus(x) = e^x below -30,
  // to 1e-13), possibly -inf or -0, whose exp is still a decay.
  const double log_softplus = x > 20.0 ? std::log(x) : (x < -30.0 ? x : std::log(softplus));
  return -std::exp(A_log + log_softplus);
}

double FusedBeta(double b) { return 1.0 / (1.0 + std::exp(-b)); }

absl::StatusOr<Outputs> RunChecked(const GdnOptions& options,
                                   const Inputs& in) {
  absl::StatusOr<Dims> dims = CheckInputs(options, in);
  if (!dims.ok()) return dims.status();
  const Dims d = *dims;
  const int64_t group = d.hv / d.hqk;
  const double scale = options.scale != 0.0f
                           ? static_cast<double>(options.scale)
                           : 1.0 / std::sqrt(static_cast<double>(d.k));

  Outputs out;
  out.o.assign(d.t * d.hv * d.v, 0.0);
  out.final_states.resize(d.n);
  for (int64_t seq = 0; seq < d.n; ++seq) {
    // [Hv, K, V], V fastest.
    std::vector<double>& state = out.final_states[seq];
    state.assign(d.hv * d.k * d.v, 0.0);
    const std::vector<float>& init = in.initial_states[seq];
    for (size_t i = 0; i < init.size(); ++i) state[i] = init[i];
  }

  // One (sequence, value head) pair: its state slice and its output rows are
  // its own, so pairs run on separate threads with results bitwise equal to
  // a serial run (each pair's arithmetic is in the same order either way).
  auto run_pair = [&](int64_t seq, int64_t h) {
    std::vector<double> q(d.k), k(d.k), kv(d.v), u(d.v);
    const int64_t hk = h / group;  // GVA: value head h reads q/k head h / G
    double* s = &out.final_states[seq][h * d.k * d.v];  // [K, V]
    for (int64_t t = in.cu_seqlens[seq]; t < in.cu_seqlens[seq + 1]; ++t) {
      for (int64_t i = 0; i < d.k; ++i) {
        q[i] = in.q[(t * d.hqk + hk) * d.k + i];
        k[i] = in.k[(t * d.hqk + hk) * d.k + i];
      }
      if (options.l2_norm_qk) {
        L2Normalize(&q);
        L2Normalize(&k);
      }
      double g, beta;
      if (options.gating == GatingMode::kDirect) {
        g = in.g[t * d.hv + h];
        beta = in.beta[t * d.hv + h];
      } else {
        g = FusedDecay(in.a[t * d.hv + h], in.A_log[h], in.dt_bias[h]);
        beta = FusedBeta(in.b[t * d.hv + h]);
      }
      // u = beta (v - S^T k) between the two passes over the state.
      DecayAndReadK(s, std::exp(g), k.data(), kv.data(), d.k, d.v);
      const float* v_t = &in.v[(t * d.hv + h) * d.v];
      for (int64_t j = 0; j < d.v; ++j) u[j] = beta * (v_t[j] - kv[j]);
      UpdateAndReadQ(s, k.data(), u.data(), q.data(), scale,
                     &out.o[(t * d.hv + h) * d.v], d.k, d.v);
    }
  };

  // Threads only when there is enough work to pay for them (the oracle's
  // own tests run K = V = 1 on a few tokens).
  const int64_t pairs = d.n * d.hv;
  const int64_t work = d.t * d.hv * d.k * d.v;
  const int64_t threads = std::min<int64_t>(
      pairs, work < (1 << 22) ? 1 : std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t p = next++; p < pairs; p = next++) run_pair(p / d.hv, p % d.hv);
  };
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return out;
}

Outputs Run(const GdnOptions& options, const Inputs& inputs) {
  absl::StatusOr<Outputs> out = RunChecked(options, inputs);
  if (!out.ok()) {
    std::fprintf(stderr, "gdn::oracle::Run: %s\n",
                 out.status().ToString().c_str());
    std::abort();
  }
  return *std::move(out);
}

}  // namespace gdn::oracle
