// TPrep (kernels/cuda/chunked/tprep.cuh, v8 chunked prefill step 1) against
// a float64 reference built here from the same (rounded) inputs: T'' = T
// diag(beta) from its two Op parts, P, rq, rk, G, exp(G), exp(G_last - G),
// exp(G_last), and the padding entries (exactly 0). Every bound is stated
// at its use with its reason; each case prints its worst error / bound
// ratio per quantity ("worst err/bound") and T'''s error relative to its
// row's largest entry ("T row-rel", the design's ~2^-16 figure).
// Skips without a CUDA device.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/chunk_table.cuh"
#include "kernels/cuda/chunked/tprep.h"
#include "kernels/cuda/chunked/tprep_args.h"
#include "kernels/gdn_types.h"
#include "tests/gpu/input_bits.h"

namespace gdn::cuda::chunked {
namespace {

enum class Gate { kMild, kNone, kStrong, kQwen };

struct Case {
  std::string name;
  DType dtype;
  int K;
  int Hqk, Hv;
  std::vector<int> lens;
  Gate gate;
  bool l2 = true;
  bool all_equal = false;
  // Some q and k rows at ~1e30 (bf16 only): their fp32 sum of squares
  // overflows, so TPrep keeps them times kL2NormRescale and reports the
  // inverse norm of the rescaled row (v7's rule; its reload path), negated,
  // and flags the tile (tprep_args.h).
  bool huge_rows = false;
};

// gtest prints a failing case by its name.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

bool HaveDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

using gpu_test::FromBits;  // host rounding to / from the 16-bit input type
using gpu_test::ToBits;

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x << ": " << cudaGetErrorString(x)

template <typename T>
T* Upload(const std::vector<T>& v) {
  T* d = nullptr;
  if (v.empty()) return nullptr;
  if (cudaMalloc(&d, v.size() * sizeof(T)) != cudaSuccess) return nullptr;
  cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}

// Worst err / bound of one quantity, and how many entries broke their bound.
struct Worst {
  double ratio = 0;
  int64_t over = 0;
  std::string where;
  void Add(double err, double bound, const std::string& at) {
    const double r = std::isfinite(err) ? err / bound : 1e30;
    if (!(r <= 1.0)) ++over;
    if (!(r <= ratio)) {
      ratio = r;
      where = at;
    }
  }
};

class TPrepTest : public ::testing::TestWithParam<Case> {};

TEST_P(TPrepTest, MatchesFloat64) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const Case& cs = GetParam();
  const int K = cs.K, Hqk = cs.Hqk, Hv = cs.Hv, G = Hv / Hqk;
  const DType dt = cs.dtype;
  const int N = static_cast<int>(cs.lens.size());
  std::vector<int32_t> cu(N + 1, 0);
  for (int s = 0; s < N; ++s) cu[s + 1] = cu[s] + cs.lens[s];
  const int T = cu[N];
  int C = 0;
  for (int s = 0; s < N; ++s) C += (cs.lens[s] + 63) / 64;

  // ---- inputs (fixed seed per case) ----
  uint64_t seed = 0xcbf29ce484222325ull;  // FNV-1a of the case name: fixed everywhere
  for (const char ch : cs.name) seed = (seed ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  const double amp = cs.l2 ? 1.0 : 1.0 / std::sqrt(static_cast<double>(K));
  std::vector<uint16_t> qb(static_cast<size_t>(T) * Hqk * K), kb(qb.size());
  std::vector<double> qd(qb.size()), kd(qb.size());
  for (size_t x = 0; x < qb.size(); ++x) {
    // all_equal: every token of a head has the same q and the same k.
    const size_t src = cs.all_equal ? x % (static_cast<size_t>(Hqk) * K) : x;
    if (src == x) {
      const size_t t = x / (static_cast<size_t>(Hqk) * K);
      const double q_amp = cs.huge_rows && t % 11 == 5 ? 1e30 : amp;
      const double k_amp = cs.huge_rows && t % 7 == 3 ? 1e30 : amp;
      qb[x] = ToBits(q_amp * normal(rng), dt);
      kb[x] = ToBits(k_amp * normal(rng), dt);
    } else {
      qb[x] = qb[src];
      kb[x] = kb[src];
    }
    qd[x] = FromBits(qb[x], dt);
    kd[x] = FromBits(kb[x], dt);
  }
  const size_t th = static_cast<size_t>(T) * Hv;
  std::vector<float> g(th), beta(th), a(th), b(th), A_log(Hv), dt_bias(Hv);
  std::vector<double> gd(th), betad(th);  // the exact gate of each input (float64)
  for (size_t x = 0; x < th; ++x) {
    switch (cs.gate) {
      case Gate::kMild: g[x] = static_cast<float>(-(0.001 + 0.099 * uni(rng))); break;
      case Gate::kNone: g[x] = 0.f; break;
      case Gate::kStrong: g[x] = static_cast<float>(-20.0 + 2.0 * uni(rng) - 1.0); break;
      case Gate::kQwen: break;
    }
    beta[x] = static_cast<float>(cs.gate == Gate::kStrong ? 0.5 + 0.5 * uni(rng)
                                                          : 0.05 + 0.95 * uni(rng));
    a[x] = static_cast<float>(normal(rng));
    b[x] = static_cast<float>(2.0 * normal(rng));
  }
  for (int h = 0; h < Hv; ++h) {
    // A_log in [log 0.5, log 16], the last head exactly at log 16.
    A_log[h] = static_cast<float>(h == Hv - 1 ? std::log(16.0)
                                              : std::log(0.5) + (std::log(32.0)) * uni(rng));
    dt_bias[h] = static_cast<float>(normal(rng));
  }
  for (size_t x = 0; x < th; ++x) {
    if (cs.gate == Gate::kQwen) {
      const int h = static_cast<int>(x % Hv);
      const double z = static_cast<double>(a[x]) + static_cast<double>(dt_bias[h]);
      const double sp = z > 30 ? z : std::log1p(std::exp(z));
      gd[x] = -std::exp(static_cast<double>(A_log[h])) * sp;
      betad[x] = 1.0 / (1.0 + std::exp(-static_cast<double>(b[x])));
    } else {
      gd[x] = g[x];
      betad[x] = beta[x];
    }
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(K));

  // ---- device ----
  ChunkArgs args;
  uint16_t* q_d = Upload(qb);
  uint16_t* k_d = Upload(kb);
  float* g_d = Upload(g);
  float* beta_d = Upload(beta);
  float* a_d = Upload(a);
  float* b_d = Upload(b);
  float* A_log_d = Upload(A_log);
  float* dt_bias_d = Upload(dt_bias);
  int32_t* cu_d = Upload(cu);
  int32_t* table_d = nullptr;
  CUDA_OK(cudaMalloc(&table_d, (N + 1 + C) * sizeof(int32_t)));
  const TPrepLayout layout(C, Hqk, Hv);
  void* ws_d = nullptr;
  CUDA_OK(cudaMalloc(&ws_d, layout.total));
  // NaN-fill (0xFF bytes): every entry must be written.
  CUDA_OK(cudaMemset(ws_d, 0xFF, layout.total));
  args.q = q_d;
  args.k = k_d;
  args.g = g_d;
  args.beta = beta_d;
  args.a = a_d;
  args.b = b_d;
  args.A_log = A_log_d;
  args.dt_bias = dt_bias_d;
  args.cu_seqlens = cu_d;
  args.chunk_table = table_d;
  args.num_seqs = N;
  args.num_chunks = C;
  args.num_qk_heads = Hqk;
  args.num_v_heads = Hv;
  args.group_size = G;
  args.scale = static_cast<float>(scale);
  args.fused_gating = cs.gate == Gate::kQwen;
  args.l2_norm_qk = cs.l2;
  args.io_dtype = dt;
  ChunkTableKernel<><<<1, kTableThreads>>>(cu_d, N, table_d);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(LaunchTPrep(args, layout.At(ws_d), K, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<char> ws(layout.total);
  CUDA_OK(cudaMemcpy(ws.data(), ws_d, layout.total, cudaMemcpyDeviceToHost));
  std::vector<int32_t> table(N + 1 + C);
  CUDA_OK(cudaMemcpy(table.data(), table_d, table.size() * 4, cudaMemcpyDeviceToHost));
  for (void* p : {static_cast<void*>(q_d), static_cast<void*>(k_d), static_cast<void*>(g_d),
                  static_cast<void*>(beta_d), static_cast<void*>(a_d), static_cast<void*>(b_d),
                  static_cast<void*>(A_log_d), static_cast<void*>(dt_bias_d),
                  static_cast<void*>(cu_d), static_cast<void*>(table_d), ws_d}) {
    cudaFree(p);
  }
  const TPrepWorkspace w = layout.At(ws.data());

  // ---- reference and comparison ----
  // Bounds (u = 2^-24, fp32's unit roundoff):
  //  G: the device sums g in fp32 by a warp scan (<= 8 roundings of partial
  //     sums, each <= u S_i with S_i = sum_{t<=i} |g_t|) after FusedDecay's
  //     few-ulp g: |dG_i| <= 2^-20 S_i; bound epsG S_i with epsG = 2^-19.
  //  exp(G) etc.: relative error <= |dG| + expf's 2 ulp, i.e. epsG S_i +
  //     2^-21 (times 1.1 for exp(dx) - 1 > dx), plus 2^-126 absolute for
  //     results in fp32's subnormal range.
  //  rq, rk: fp32 sum of K squares (32 sequential terms per lane, 2
  //     shuffles: <= 34 u relative), sqrtf and 1 / x correctly rounded:
  //     bound 2^-18 relative. Exactly 1 without the L2 norm.
  //  P_ij (j <= i < L): one rounding to Op (unit roundoff 2^-8 bf16, 2^-11
  //     fp16; bound doubled: u_op = 2^-7 / 2^-10 of |P|) on top of the fp32
  //     value, whose error is relative to
  //     Pbar_ij = scale Gamma_ij |q_i| rq_i |k_j| rk_j
  //     (a tensor-core sum of K products with fp32 accumulation, not IEEE:
  //     <= 2^-14 Pbar, with margin) plus the decay's 2 epsG S_i Pbar; plus
  //     2^-24 absolute (fp16's subnormal step).
  //  T''_ij (j <= i < L): first order, dT = -T dA T. A's entries carry
  //     errors relative to Abar_ij = beta_i Gamma_ij |k_i| rk_i |k_j| rk_j
  //     (the same tensor-core sums and decay errors), the forward
  //     substitution and the split-bf16 merges (<= ~2^-16 relative per
  //     product, three terms, lo x lo dropped) errors relative to the
  //     products of |T| and |A|: all are covered by
  //       (2^-14 + 2.2 epsG S_max) (|T| (I + Abar) |T|)_ij beta_j
  //     plus the hi + lo storage (bf16: <= 2^-16, two roundings of 2^-8;
  //     fp16: <= 2^-22 of |T''_ij|; bound 2^-15 |T''_ij|) and 2^-24
  //     absolute (fp16's subnormal step: hi and lo of an entry below 2^-14
  //     leave up to 2^-25, so fp16 rows with a small beta_i show a row-rel
  //     figure above 2^-16).
  //  Padding entries and T'' above the diagonal, P above the diagonal: 0.
  const double epsG = std::ldexp(1.0, -19);
  const double u_op = dt == DType::kBF16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
  const double tiny = std::ldexp(1.0, -24);
  Worst wT, wP, wrq, wrk, wG, weg, wed, wdecay;
  double row_rel = 0;  // max |T'' err| / max_j |T''_ref,ij|
  int64_t pad_nonzero = 0;
  int64_t sign_errors = 0;  // rq / rk sign or tile flag unlike the rows' overflow
  int64_t huge_tiles = 0;
  auto op_at = [&](const uint16_t* base, size_t idx) {
    return static_cast<double>(FromBits(base[idx], dt));  // sums of parts in double
  };
  for (int s = 0; s < N; ++s) {
    ASSERT_EQ(table[s], [&] {
      int c0 = 0;
      for (int r = 0; r < s; ++r) c0 += (cs.lens[r] + 63) / 64;
      return c0;
    }());
  }
  for (int s = 0, c = 0; s < N; ++s) {
    for (int cc = 0; cc * 64 < cs.lens[s]; ++cc, ++c) {
      ASSERT_EQ(table[N + 1 + c], s);
      const int t0 = cu[s] + cc * 64;
      const int L = std::min(64, cu[s + 1] - t0);
      for (int hq = 0; hq < Hqk; ++hq) {
        // norms of the raw rows (float64) and rq, rk
        // (rq_dev, rk_dev: what the device reports; for a row whose fp32
        // sum of squares overflows, the inverse norm of the row times
        // kL2NormRescale, without the eps.)
        std::vector<double> nq(64, 0), nk(64, 0), rq(64, 0), rk(64, 0);
        std::vector<double> rq_dev(64, 0), rk_dev(64, 0);
        std::vector<bool> q_over_rows(64, false), k_over_rows(64, false);
        for (int i = 0; i < L; ++i) {
          const size_t base = (static_cast<size_t>(t0 + i) * Hqk + hq) * K;
          double sq = 0, sk = 0;
          for (int d = 0; d < K; ++d) {
            sq += qd[base + d] * qd[base + d];
            sk += kd[base + d] * kd[base + d];
          }
          nq[i] = std::sqrt(sq);
          nk[i] = std::sqrt(sk);
          rq[i] = cs.l2 ? 1.0 / std::sqrt(sq + kL2NormEps) : 1.0;
          rk[i] = cs.l2 ? 1.0 / std::sqrt(sk + kL2NormEps) : 1.0;
          const double c2 = static_cast<double>(kL2NormRescale) * kL2NormRescale;
          const bool q_over = cs.l2 && sq > 1e38, k_over = cs.l2 && sk > 1e38;
          rq_dev[i] = q_over ? 1.0 / std::sqrt(c2 * sq) : rq[i];
          rk_dev[i] = k_over ? 1.0 / std::sqrt(c2 * sk) : rk[i];
          q_over_rows[i] = q_over;
          k_over_rows[i] = k_over;
        }
        const size_t cq = static_cast<size_t>(c) * Hqk + hq;
        // Rescaled rows: negated inverse norms and the tile's flag.
        bool tile_over = false;
        for (int i = 0; i < L; ++i) {
          tile_over = tile_over || q_over_rows[i] || k_over_rows[i];
          sign_errors += (w.rq[cq * 64 + i] < 0) != q_over_rows[i];
          sign_errors += (w.rk[cq * 64 + i] < 0) != k_over_rows[i];
        }
        sign_errors += w.rescaled[cq] != (tile_over ? 1 : 0);
        huge_tiles += tile_over;
        for (int i = 0; i < 64; ++i) {
          const double gq = std::fabs(w.rq[cq * 64 + i]), gk = std::fabs(w.rk[cq * 64 + i]);
          const std::string at = "chunk " + std::to_string(c) + " row " + std::to_string(i);
          if (i >= L) {
            pad_nonzero += (gq != 0) + (gk != 0);
            continue;
          }
          const double rb = cs.l2 ? std::ldexp(1.0, -18) : 0.0;
          wrq.Add(std::fabs(gq - rq_dev[i]), rb * rq_dev[i] + 1e-300, "rq " + at);
          wrk.Add(std::fabs(gk - rk_dev[i]), rb * rk_dev[i] + 1e-300, "rk " + at);
        }
        // dot products of the raw rows
        std::vector<double> QK(64 * 64, 0), KK(64 * 64, 0);
        for (int i = 0; i < L; ++i)
          for (int j = 0; j < L; ++j) {
            const size_t bi = (static_cast<size_t>(t0 + i) * Hqk + hq) * K;
            const size_t bj = (static_cast<size_t>(t0 + j) * Hqk + hq) * K;
            double sqk = 0, skk = 0;
            for (int d = 0; d < K; ++d) {
              sqk += qd[bi + d] * kd[bj + d];
              skk += kd[bi + d] * kd[bj + d];
            }
            QK[i * 64 + j] = sqk;
            KK[i * 64 + j] = skk;
          }
        for (int r = 0; r < G; ++r) {
          const int h = hq * G + r;
          const size_t ch = static_cast<size_t>(c) * Hv + h;
          std::vector<double> Gc(64), Sa(64), be(64, 0);
          double run = 0, sabs = 0;
          for (int i = 0; i < 64; ++i) {
            if (i < L) {
              const size_t idx = static_cast<size_t>(t0 + i) * Hv + h;
              run += gd[idx];
              sabs += std::fabs(gd[idx]);
              be[i] = betad[idx];
            }
            Gc[i] = run;
            Sa[i] = sabs;
          }
          const double GL = Gc[L - 1], SL = Sa[L - 1];
          const std::string head = "chunk " + std::to_string(c) + " head " + std::to_string(h);
          // per-token vectors
          for (int i = 0; i < 64; ++i) {
            const std::string at = head + " row " + std::to_string(i);
            wG.Add(std::fabs(w.g_cum[ch * 64 + i] - Gc[i]), epsG * Sa[i] + 1e-30, "G " + at);
            const double eg = w.eg[ch * 64 + i], ed = w.ed[ch * 64 + i];
            if (i >= L) {
              pad_nonzero += (eg != 0) + (ed != 0);
              continue;
            }
            const double eg_ref = std::exp(Gc[i]), ed_ref = std::exp(GL - Gc[i]);
            weg.Add(std::fabs(eg - eg_ref),
                    1.1 * (epsG * Sa[i] + std::ldexp(1.0, -21)) * eg_ref + std::ldexp(1.0, -126),
                    "eg " + at);
            wed.Add(std::fabs(ed - ed_ref),
                    1.1 * (2 * epsG * SL + std::ldexp(1.0, -21)) * ed_ref + std::ldexp(1.0, -126),
                    "ed " + at);
          }
          const double dref = std::exp(GL);
          wdecay.Add(std::fabs(w.decay[ch] - dref),
                     1.1 * (epsG * SL + std::ldexp(1.0, -21)) * dref + std::ldexp(1.0, -126),
                     "decay " + head);
          // A, Abar, T (float64 forward substitution), |T| (I + Abar) |T|
          std::vector<double> A(64 * 64, 0), Ab(64 * 64, 0), Tm(64 * 64, 0);
          for (int i = 0; i < L; ++i)
            for (int j = 0; j < i; ++j) {
              const double gam = std::exp(Gc[i] - Gc[j]);
              A[i * 64 + j] = be[i] * gam * rk[i] * rk[j] * KK[i * 64 + j];
              Ab[i * 64 + j] = be[i] * gam * rk[i] * rk[j] * nk[i] * nk[j];
            }
          for (int j = 0; j < 64; ++j) {
            Tm[j * 64 + j] = 1.0;
            for (int i = j + 1; i < 64; ++i) {
              double acc = 0;
              for (int m = j; m < i; ++m) acc += A[i * 64 + m] * Tm[m * 64 + j];
              Tm[i * 64 + j] = -acc;
            }
          }
          std::vector<double> M1(64 * 64, 0), Bm(64 * 64, 0);  // M1 = (I + Abar) |T|
          for (int i = 0; i < 64; ++i)
            for (int j = 0; j <= i; ++j) {
              double acc = std::fabs(Tm[i * 64 + j]);
              for (int m = j; m < i; ++m) acc += Ab[i * 64 + m] * std::fabs(Tm[m * 64 + j]);
              M1[i * 64 + j] = acc;
            }
          for (int i = 0; i < 64; ++i)
            for (int j = 0; j <= i; ++j) {
              double acc = 0;
              for (int m = j; m <= i; ++m) acc += std::fabs(Tm[i * 64 + m]) * M1[m * 64 + j];
              Bm[i * 64 + j] = acc;
            }
          const double cT = std::ldexp(1.0, -14) + 2.2 * epsG * SL;
          for (int i = 0; i < 64; ++i) {
            double row_max = 0, row_err = 0;
            for (int j = 0; j < 64; ++j) {
              const size_t idx = ch * 4096 + static_cast<size_t>(i) * 64 + j;
              const double got = op_at(w.t_hi, idx) + op_at(w.t_lo, idx);
              const double pg = op_at(w.p, idx);
              const std::string at =
                  head + " (" + std::to_string(i) + "," + std::to_string(j) + ")";
              if (i >= L || j > i) {
                pad_nonzero += (got != 0) + (pg != 0);
                continue;
              }
              const double tref = Tm[i * 64 + j] * be[j];
              const double err = std::fabs(got - tref);
              wT.Add(err,
                     cT * Bm[i * 64 + j] * be[j] + std::ldexp(1.0, -15) * std::fabs(tref) + tiny,
                     "T'' " + at);
              row_max = std::max(row_max, std::fabs(tref));
              row_err = std::max(row_err, err);
              const double gam = std::exp(Gc[i] - Gc[j]);
              const double pref = scale * gam * rq[i] * rk[j] * QK[i * 64 + j];
              const double pbar = scale * gam * rq[i] * nq[i] * rk[j] * nk[j];
              wP.Add(std::fabs(pg - pref),
                     u_op * std::fabs(pref) +
                         (std::ldexp(1.0, -14) + 2.2 * epsG * Sa[i]) * pbar + tiny,
                     "P " + at);
            }
            if (i < L && row_max > 0) row_rel = std::max(row_rel, row_err / row_max);
          }
        }
      }
    }
  }
  std::printf(
      "[ %s ] worst err/bound T''=%.3g P=%.3g rq=%.3g rk=%.3g G=%.3g eg=%.3g ed=%.3g "
      "decay=%.3g; T row-rel 2^%.1f; padding nonzero %lld\n",
      cs.name.c_str(), wT.ratio, wP.ratio, wrq.ratio, wrk.ratio, wG.ratio, weg.ratio, wed.ratio,
      wdecay.ratio, row_rel > 0 ? std::log2(row_rel) : -999.0,
      static_cast<long long>(pad_nonzero));
  for (const Worst* x : {&wT, &wP, &wrq, &wrk, &wG, &weg, &wed, &wdecay}) {
    EXPECT_EQ(x->over, 0) << "worst ratio " << x->ratio << " at " << x->where;
  }
  EXPECT_EQ(pad_nonzero, 0) << "padding / above-diagonal entries not zero";
  EXPECT_EQ(sign_errors, 0) << "rescaled rows: rq / rk not negated, or the tile flag wrong";
  if (cs.huge_rows) EXPECT_GT(huge_tiles, 0) << "the case has no rescaled row";
}

// Unsupported shapes and dtypes are refused before any launch.
TEST(TPrepLaunch, RefusesUnsupported) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  ChunkArgs args;
  args.io_dtype = DType::kBF16;
  EXPECT_EQ(LaunchTPrep(args, TPrepWorkspace{}, 96, nullptr), cudaErrorInvalidValue);
  args.io_dtype = DType::kF32;
  EXPECT_EQ(LaunchTPrep(args, TPrepWorkspace{}, 128, nullptr), cudaErrorInvalidValue);
  args.io_dtype = DType::kBF16;  // no chunks: nothing to launch
  EXPECT_EQ(LaunchTPrep(args, TPrepWorkspace{}, 128, nullptr), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

std::vector<Case> Cases() {
  const DType bf = DType::kBF16, fp = DType::kF16;
  return {
      {"random_bf16", bf, 128, 2, 4, {200}, Gate::kMild},
      {"random_fp16", fp, 128, 2, 4, {200}, Gate::kMild},
      {"tail1_bf16", bf, 128, 1, 2, {65}, Gate::kMild},
      {"tail63_bf16", bf, 128, 1, 2, {127}, Gate::kMild},
      {"tail63_fp16", fp, 128, 1, 2, {127}, Gate::kMild},
      {"varlen_bf16", bf, 128, 2, 6, {1, 64, 130}, Gate::kMild},
      {"varlen_fp16_qwen", fp, 128, 2, 6, {1, 64, 130}, Gate::kQwen},
      {"allequal_bf16", bf, 128, 1, 2, {128}, Gate::kMild, true, true},
      {"allequal_fp16", fp, 128, 1, 2, {128}, Gate::kMild, true, true},
      {"allequal_nodecay_bf16", bf, 128, 1, 2, {100}, Gate::kNone, true, true},
      {"strong_bf16", bf, 128, 1, 3, {130}, Gate::kStrong},
      {"strong_fp16", fp, 128, 1, 3, {130}, Gate::kStrong},
      {"qwen_bf16", bf, 128, 1, 4, {100, 64}, Gate::kQwen},
      {"k64_bf16", bf, 64, 2, 4, {150}, Gate::kMild},
      {"k64_fp16_qwen", fp, 64, 1, 2, {70}, Gate::kQwen},
      {"l2off_bf16", bf, 128, 1, 2, {96}, Gate::kMild, false},
      {"l2off_fp16", fp, 128, 1, 2, {96}, Gate::kMild, false},
      {"huge_rows_bf16", bf, 128, 2, 4, {150}, Gate::kMild, true, false, true},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, TPrepTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace gdn::cuda::chunked
