// The float64 oracle on hand-derivable cases (K = V = 1 or 2, arithmetic
// written out) and on the operator's defining properties: beta = 0 only
// decays, g = 0 / beta = 1 with unit k overwrites along k, GVA reads q/k head
// h / G, fused gating is the documented formula, the L2 norm is
// x / sqrt(sum x^2 + 1e-6), sequences are independent.
#include "kernels/oracle/gdn_oracle.h"

#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdn::oracle {
namespace {

GdnOptions SmallOptions(int hqk, int hv, int k, int v) {
  GdnOptions options;
  options.shape = {hqk, hv, k, v};
  options.input_dtype = DType::kF32;
  options.l2_norm_qk = false;
  options.scale = 1.0f;
  return options;
}

// Single sequence, direct gating, everything given.
Inputs OneSequence(std::vector<float> q, std::vector<float> k,
                   std::vector<float> v, std::vector<float> g,
                   std::vector<float> beta, std::vector<float> initial) {
  Inputs in;
  in.cu_seqlens = {0, static_cast<int32_t>(g.size())};
  in.q = std::move(q);
  in.k = std::move(k);
  in.v = std::move(v);
  in.g = std::move(g);
  in.beta = std::move(beta);
  in.initial_states = {std::move(initial)};
  return in;
}

std::vector<float> Randn(std::mt19937& rng, size_t n, float stddev = 1.0f) {
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> x(n);
  for (float& e : x) e = normal(rng);
  return x;
}

TEST(OracleTest, ScalarStateByHand) {
  // K = V = 1, scale 1, no L2 norm. S0 = 4.
  // t0: q 2, k 1, v 3, g ln 0.5, beta 0.5:
  //   S = 0.5 * 4 = 2; u = 0.5 * (3 - 2 * 1) = 0.5; S = 2 + 1 * 0.5 = 2.5;
  //   o = 2.5 * 2 = 5.
  // t1: q 1, k 0.5, v -1, g 0, beta 1:
  //   u = -1 - 2.5 * 0.5 = -2.25; S = 2.5 + 0.5 * -2.25 = 1.375; o = 1.375.
  const Inputs in = OneSequence({2, 1}, {1, 0.5f}, {3, -1},
                                {std::log(0.5f), 0}, {0.5f, 1}, {4});
  const Outputs out = oracle::Run(SmallOptions(1, 1, 1, 1), in);
  ASSERT_EQ(out.o.size(), 2u);
  EXPECT_NEAR(out.o[0], 5.0, 1e-6);  // ln 0.5 is rounded to fp32
  EXPECT_NEAR(out.o[1], 1.375, 1e-6);
  EXPECT_NEAR(out.final_states[0][0], 1.375, 1e-6);
}

TEST(OracleTest, TwoByTwoStateByHand) {
  // K = V = 2, g = 0, scale 1. S0 = [[1, 2], [3, 4]] (rows k, columns v).
  // k = (1, 0), v = (10, 20), beta = 0.5:
  //   S^T k = row 0 = (1, 2); u = 0.5 * ((10, 20) - (1, 2)) = (4.5, 9);
  //   S = S + k u^T: row 0 += (4.5, 9) -> [[5.5, 11], [3, 4]].
  // q = (1, 1): o = S^T q = (5.5 + 3, 11 + 4) = (8.5, 15).
  const Inputs in = OneSequence({1, 1}, {1, 0}, {10, 20}, {0}, {0.5f},
                                {1, 2, 3, 4});
  const Outputs out = oracle::Run(SmallOptions(1, 1, 2, 2), in);
  EXPECT_THAT(out.o, ::testing::ElementsAre(8.5, 15.0));
  EXPECT_THAT(out.final_states[0], ::testing::ElementsAre(5.5, 11, 3, 4));
}

TEST(OracleTest, ScaleMultipliesTheOutputAndDefaultsToInverseSqrtK) {
  std::mt19937 rng(1);
  const int K = 2, V = 2, T = 3;
  Inputs in = OneSequence(Randn(rng, T * K), Randn(rng, T * K),
                          Randn(rng, T * V), {-0.1f, -0.2f, -0.3f},
                          {0.3f, 0.6f, 0.9f}, Randn(rng, K * V));
  GdnOptions unit = SmallOptions(1, 1, K, V);
  GdnOptions by_default = unit;
  by_default.scale = 0.0f;  // K^-1/2
  const Outputs a = oracle::Run(unit, in);
  const Outputs b = oracle::Run(by_default, in);
  for (size_t i = 0; i < a.o.size(); ++i) {
    EXPECT_NEAR(b.o[i], a.o[i] / std::sqrt(2.0), 1e-12);
  }
  EXPECT_EQ(a.final_states, b.final_states);  // scale only touches o
}

TEST(OracleTest, BetaZeroOnlyDecaysTheState) {
  // S_T = exp(sum g) S_0 and o_t = exp(sum_{s<=t} g_s) S_0^T (scale q_t).
  std::mt19937 rng(2);
  const int K = 3, V = 2, T = 5;
  std::vector<float> g = {-0.1f, -0.5f, 0.0f, -2.0f, -0.01f};
  const std::vector<float> s0 = Randn(rng, K * V);
  const Inputs in = OneSequence(Randn(rng, T * K), Randn(rng, T * K),
                                Randn(rng, T * V), g,
                                std::vector<float>(T, 0.0f), s0);
  GdnOptions options = SmallOptions(1, 1, K, V);
  options.scale = 0.7f;
  const Outputs out = oracle::Run(options, in);
  double cumulative = 0;
  for (int t = 0; t < T; ++t) {
    cumulative += g[t];
    for (int j = 0; j < V; ++j) {
      double expected = 0;
      for (int i = 0; i < K; ++i) expected += s0[i * V + j] * 0.7 * in.q[t * K + i];
      expected *= std::exp(cumulative);
      EXPECT_NEAR(out.o[t * V + j], expected, 1e-6) << "t=" << t << " j=" << j;
    }
  }
  for (int e = 0; e < K * V; ++e) {
    EXPECT_NEAR(out.final_states[0][e], std::exp(cumulative) * s0[e], 1e-6);
  }
}

TEST(OracleTest, NoDecayFullWriteOverwritesAlongUnitK) {
  // g = 0, beta = 1, |k| = 1: S' = S + k (v - S^T k)^T, so S'^T k = v exactly
  // (in exact arithmetic), whatever S was; directions orthogonal to k keep
  // their reads.
  std::mt19937 rng(3);
  const int K = 2, V = 2;
  const float angle = 0.7f;
  const std::vector<float> k = {std::cos(angle), std::sin(angle)};
  const std::vector<float> orth = {-std::sin(angle), std::cos(angle)};
  const std::vector<float> v = Randn(rng, V);
  const std::vector<float> s0 = Randn(rng, K * V);
  // Read back through q = k: o = S'^T k = v.
  const Inputs in = OneSequence(k, k, v, {0}, {1}, s0);
  const Outputs out = oracle::Run(SmallOptions(1, 1, K, V), in);
  EXPECT_NEAR(out.o[0], v[0], 1e-6);
  EXPECT_NEAR(out.o[1], v[1], 1e-6);
  // And through the orthogonal direction nothing changed.
  const Inputs in_orth = OneSequence(orth, k, v, {0}, {1}, s0);
  const Outputs out_orth = oracle::Run(SmallOptions(1, 1, K, V), in_orth);
  for (int j = 0; j < V; ++j) {
    const double before = s0[0 * V + j] * orth[0] + s0[1 * V + j] * orth[1];
    EXPECT_NEAR(out_orth.o[j], before, 1e-6);
  }
}

TEST(OracleTest, GroupedValueHeadsReadQkHeadHOverG) {
  // Hqk = 2, Hv = 4 (G = 2): value head h must equal a run with Hqk = Hv = 1
  // over q/k head h / 2 and value head h's v, g, beta, state.
  std::mt19937 rng(4);
  const int K = 2, V = 2, T = 4, Hqk = 2, Hv = 4;
  Inputs in;
  in.cu_seqlens = {0, T};
  in.q = Randn(rng, T * Hqk * K);
  in.k = Randn(rng, T * Hqk * K);
  in.v = Randn(rng, T * Hv * V);
  in.g = Randn(rng, T * Hv, 0.1f);
  for (float& g : in.g) g = -std::abs(g);
  in.beta = std::vector<float>(T * Hv);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (float& b : in.beta) b = unit(rng);
  in.initial_states = {Randn(rng, Hv * K * V)};
  GdnOptions options = SmallOptions(Hqk, Hv, K, V);
  options.l2_norm_qk = true;
  const Outputs grouped = oracle::Run(options, in);

  for (int h = 0; h < Hv; ++h) {
    Inputs one;
    one.cu_seqlens = {0, T};
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < K; ++i) {
        one.q.push_back(in.q[(t * Hqk + h / 2) * K + i]);
        one.k.push_back(in.k[(t * Hqk + h / 2) * K + i]);
      }
      for (int j = 0; j < V; ++j) one.v.push_back(in.v[(t * Hv + h) * V + j]);
      one.g.push_back(in.g[t * Hv + h]);
      one.beta.push_back(in.beta[t * Hv + h]);
    }
    one.initial_states = {std::vector<float>(
        in.initial_states[0].begin() + h * K * V,
        in.initial_states[0].begin() + (h + 1) * K * V)};
    GdnOptions single = SmallOptions(1, 1, K, V);
    single.l2_norm_qk = true;
    const Outputs alone = oracle::Run(single, one);
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < V; ++j) {
        EXPECT_EQ(grouped.o[(t * Hv + h) * V + j], alone.o[t * V + j])
            << "h=" << h << " t=" << t;
      }
    }
    for (int e = 0; e < K * V; ++e) {
      EXPECT_EQ(grouped.final_states[0][h * K * V + e], alone.final_states[0][e]);
    }
  }
}

TEST(OracleTest, FusedGatingFormula) {
  // g = -exp(A_log) * softplus(a + dt_bias), softplus(x) = log(1 + e^x),
  // = x above 20; beta = 1 / (1 + e^-b).
  EXPECT_NEAR(FusedDecay(0.3, std::log(2.0), 0.2),
              -2.0 * std::log(1.0 + std::exp(0.5)), 1e-12);
  EXPECT_DOUBLE_EQ(FusedDecay(24.0, 0.0, 1.0), -25.0);  // threshold: x
  EXPECT_NEAR(FusedDecay(-3.0, std::log(0.5), -1.0),
              -0.5 * std::log(1.0 + std::exp(-4.0)), 1e-12);
  EXPECT_DOUBLE_EQ(FusedBeta(0.0), 0.5);
  EXPECT_DOUBLE_EQ(FusedBeta(2.0), 1.0 / (1.0 + std::exp(-2.0)));
  EXPECT_LE(FusedDecay(-50.0, 3.0, 0.0), 0.0);
  // Past float64's exp range: e^750 overflows and softplus(-800) underflows
  // to 0, whose product was a NaN; the value is e^(750 - 800).
  EXPECT_NEAR(FusedDecay(-800.0, 750.0, 0.0), -std::exp(-50.0), 1e-12 * std::exp(-50.0));
  EXPECT_EQ(FusedDecay(-1e30, 100.0, 0.0), 0.0);

  // A fused run equals the direct run fed the same g and beta.
  std::mt19937 rng(5);
  const int K = 2, V = 2, T = 3, H = 2;
  Inputs fused;
  fused.cu_seqlens = {0, T};
  fused.q = Randn(rng, T * H * K);
  fused.k = Randn(rng, T * H * K);
  fused.v = Randn(rng, T * H * V);
  fused.a = Randn(rng, T * H);
  fused.b = Randn(rng, T * H);
  fused.A_log = {0.3f, -0.7f};
  fused.dt_bias = {-2.0f, 1.0f};
  fused.initial_states = {Randn(rng, H * K * V)};
  GdnOptions options = SmallOptions(H, H, K, V);
  options.gating = GatingMode::kFused;
  const Outputs a = oracle::Run(options, fused);

  Inputs direct = fused;
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < H; ++h) {
      direct.g.push_back(static_cast<float>(
          FusedDecay(fused.a[t * H + h], fused.A_log[h], fused.dt_bias[h])));
      direct.beta.push_back(static_cast<float>(FusedBeta(fused.b[t * H + h])));
    }
  }
  options.gating = GatingMode::kDirect;
  const Outputs b = oracle::Run(options, direct);
  for (size_t i = 0; i < a.o.size(); ++i) EXPECT_NEAR(a.o[i], b.o[i], 1e-6);
}

TEST(OracleTest, L2NormIsXOverSqrtOfSumSquaresPlusEps) {
  // With the norm on, raw q, k give what pre-normalised q, k give with it off.
  std::mt19937 rng(6);
  const int K = 2, V = 2, T = 3;
  Inputs raw = OneSequence(Randn(rng, T * K, 3.0f), Randn(rng, T * K, 3.0f),
                           Randn(rng, T * V), {-0.1f, -0.2f, -0.05f},
                           {0.2f, 0.5f, 0.8f}, Randn(rng, K * V));
  // One row so small that the epsilon matters: |x|^2 = 2e-6 vs eps 1e-6.
  raw.k[2] = raw.k[3] = 1e-3f;
  Inputs normalised = raw;
  for (std::vector<float>* x : {&normalised.q, &normalised.k}) {
    for (int t = 0; t < T; ++t) {
      double sum = 0;
      for (int i = 0; i < K; ++i) sum += double((*x)[t * K + i]) * (*x)[t * K + i];
      for (int i = 0; i < K; ++i) {
        (*x)[t * K + i] = static_cast<float>((*x)[t * K + i] / std::sqrt(sum + 1e-6));
      }
    }
  }
  GdnOptions on = SmallOptions(1, 1, K, V);
  on.l2_norm_qk = true;
  GdnOptions off = SmallOptions(1, 1, K, V);
  const Outputs a = oracle::Run(on, raw);
  const Outputs b = oracle::Run(off, normalised);
  for (size_t i = 0; i < a.o.size(); ++i) EXPECT_NEAR(a.o[i], b.o[i], 1e-6);
  for (size_t i = 0; i < a.final_states[0].size(); ++i) {
    EXPECT_NEAR(a.final_states[0][i], b.final_states[0][i], 1e-6);
  }
  // The tiny k row normalises to 1e-3 / sqrt(3e-6) per element, not 1/sqrt(2).
  EXPECT_NEAR(normalised.k[2], 1e-3 / std::sqrt(3e-6), 1e-6);
}

TEST(OracleTest, L2NormOfHugeAndTinyRowsIsExact) {
  // Rows whose sum of squares overflows fp32 (max|x| 3e38, 1e20) normalise
  // exactly like the same rows at |x| ~ 1 (float64 holds 2 * (3e38)^2; eps
  // changes those by ~1e-7), and a row of 1e-30 (squares far below eps)
  // normalises to x / sqrt(eps): o of that token is linear in q.
  const int K = 2, V = 2;
  const Inputs base = OneSequence({2, -1, 0.5f, 1, 1, 1}, {1, 2, -1, 0.5f, 1, -1},
                                  {0.3f, -1, 2, 0.5f, -0.7f, 1.1f},
                                  {-0.1f, -0.2f, -0.05f}, {0.2f, 0.5f, 0.8f},
                                  {0.4f, -0.3f, 0.2f, 0.1f});
  Inputs extreme = base;
  extreme.q[0] = 3e38f, extreme.q[1] = -1.5e38f;  // row 0 times 1.5e38
  extreme.k[0] = 1e30f, extreme.k[1] = 2e30f;     // row 0 times 1e30
  extreme.k[2] = -1e20f, extreme.k[3] = 5e19f;    // row 1 times 1e20
  extreme.q[4] = extreme.q[5] = 1e-30f;           // row 2 times 1e-30
  GdnOptions on = SmallOptions(1, 1, K, V);
  on.l2_norm_qk = true;
  const Outputs a = oracle::Run(on, extreme);
  const Outputs b = oracle::Run(on, base);
  for (int i = 0; i < 2 * V; ++i) EXPECT_NEAR(a.o[i], b.o[i], 1e-6) << i;
  for (size_t i = 0; i < a.final_states[0].size(); ++i) {
    EXPECT_NEAR(a.final_states[0][i], b.final_states[0][i], 1e-6) << i;
  }
  // Token 2: q_n = 1e-30 / sqrt(2e-60 + 1e-6) per element, against
  // 1 / sqrt(2 + 1e-6) in the base row.
  const double ratio = (1e-30 / std::sqrt(1e-6)) * std::sqrt(2 + 1e-6);
  for (int i = 2 * V; i < 3 * V; ++i) {
    EXPECT_NEAR(a.o[i] / ratio, b.o[i], 1e-6) << i;
  }
}

TEST(OracleTest, SequencesAreIndependentAndZeroStateIsZero) {
  std::mt19937 rng(7);
  const int K = 2, V = 2, H = 1;
  Inputs batch;
  batch.cu_seqlens = {0, 2, 5};
  batch.q = Randn(rng, 5 * K);
  batch.k = Randn(rng, 5 * K);
  batch.v = Randn(rng, 5 * V);
  batch.g = {-0.1f, -0.2f, -0.3f, -0.4f, -0.5f};
  batch.beta = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  batch.initial_states = {{}, Randn(rng, H * K * V)};  // zero, then given
  const GdnOptions options = SmallOptions(1, 1, K, V);
  const Outputs together = oracle::Run(options, batch);

  Inputs second;
  second.cu_seqlens = {0, 3};
  second.q.assign(batch.q.begin() + 2 * K, batch.q.end());
  second.k.assign(batch.k.begin() + 2 * K, batch.k.end());
  second.v.assign(batch.v.begin() + 2 * V, batch.v.end());
  second.g.assign(batch.g.begin() + 2, batch.g.end());
  second.beta.assign(batch.beta.begin() + 2, batch.beta.end());
  second.initial_states = {batch.initial_states[1]};
  const Outputs alone = oracle::Run(options, second);
  for (int i = 0; i < 3 * V; ++i) EXPECT_EQ(together.o[2 * V + i], alone.o[i]);
  EXPECT_EQ(together.final_states[1], alone.final_states[0]);

  // The zero-state sequence's first token: S = k u^T with u = beta v.
  const double kq = batch.k[0] * batch.q[0] + batch.k[1] * batch.q[1];
  for (int j = 0; j < V; ++j) {
    EXPECT_NEAR(together.o[j], kq * batch.beta[0] * batch.v[j], 1e-6);
  }
}

// Large enough that Run splits (sequence, head) pairs over threads: the
// result must equal, bit for bit, each (sequence, head) computed alone
// (a one-head, one-sequence run is below the threading threshold).
TEST(OracleTest, ThreadedRunEqualsEachHeadAlone) {
  std::mt19937 rng(11);
  const int K = 64, V = 64, H = 4, T0 = 300, T1 = 200, T = T0 + T1;
  Inputs batch;
  batch.cu_seqlens = {0, T0, T};
  batch.q = Randn(rng, size_t(T) * H * K);
  batch.k = Randn(rng, size_t(T) * H * K);
  batch.v = Randn(rng, size_t(T) * H * V);
  batch.g = Randn(rng, size_t(T) * H, 0.05f);
  for (float& g : batch.g) g = -std::abs(g);
  batch.beta.assign(size_t(T) * H, 0.5f);
  batch.initial_states = {Randn(rng, size_t(H) * K * V), {}};
  GdnOptions options = SmallOptions(H, H, K, V);
  options.l2_norm_qk = true;
  const Outputs together = oracle::Run(options, batch);

  const GdnOptions one_head = [&] {
    GdnOptions o = options;
    o.shape = {1, 1, K, V};
    return o;
  }();
  for (int seq = 0; seq < 2; ++seq) {
    const int begin = batch.cu_seqlens[seq], len = batch.cu_seqlens[seq + 1] - begin;
    for (int h = 0; h < H; ++h) {
      Inputs alone;
      alone.cu_seqlens = {0, len};
      for (int t = begin; t < begin + len; ++t) {
        const size_t row = size_t(t) * H + h;
        alone.q.insert(alone.q.end(), &batch.q[row * K], &batch.q[row * K] + K);
        alone.k.insert(alone.k.end(), &batch.k[row * K], &batch.k[row * K] + K);
        alone.v.insert(alone.v.end(), &batch.v[row * V], &batch.v[row * V] + V);
        alone.g.push_back(batch.g[row]);
        alone.beta.push_back(batch.beta[row]);
      }
      const std::vector<float>& init = batch.initial_states[seq];
      alone.initial_states = {init.empty() ? std::vector<float>()
                                           : std::vector<float>(&init[size_t(h) * K * V],
                                                                &init[size_t(h) * K * V] + K * V)};
      const Outputs ref = oracle::Run(one_head, alone);
      for (int t = 0; t < len; ++t) {
        for (int j = 0; j < V; ++j) {
          ASSERT_EQ(together.o[(size_t(begin + t) * H + h) * V + j], ref.o[size_t(t) * V + j])
              << "seq " << seq << " head " << h << " token " << t;
        }
      }
      for (int i = 0; i < K * V; ++i) {
        ASSERT_EQ(together.final_states[seq][size_t(h) * K * V + i], ref.final_states[0][i]);
      }
    }
  }
}

TEST(OracleTest, RunCheckedRejectsInconsistentInputs) {
  Inputs in = OneSequence({1}, {1}, {1}, {0}, {0.5f}, {});
  const GdnOptions options = SmallOptions(1, 1, 1, 1);
  EXPECT_TRUE(RunChecked(options, in).ok());
  Inputs bad = in;
  bad.v = {1, 2};
  EXPECT_EQ(RunChecked(options, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = in;
  bad.beta.clear();
  EXPECT_THAT(std::string(RunChecked(options, bad).status().message()),
              ::testing::HasSubstr("beta"));
  bad = in;
  bad.initial_states = {{1, 2}};
  EXPECT_FALSE(RunChecked(options, bad).ok());
  GdnOptions fused = options;
  fused.gating = GatingMode::kFused;
  EXPECT_THAT(std::string(RunChecked(fused, in).status().message()),
              ::testing::HasSubstr("a has"));
}

}  // namespace
}  // namespace gdn::oracle
