// The v8 chunked prefill, form P (kernels/cuda/chunked/fused_chunk.h: chunk
// table, TPrep, FusedChunkKernel) against the float64 oracle
// (kernels/oracle), with v7 (cuda::ChunkedPrefill) run on the same inputs for
// comparison: o and the final state pages, on fresh random inputs (fixed
// seed per case name). Each case prints one line with both kernels' errors
// ("[ name ] v8 o ... | v8 W' Op o ... | v7 o ..."): v8 runs with W' in hi +
// lo (the default, FusedChunkOptions) and with one Op rounding of W'. A
// timing test prints v8 (both, the whole call, and TPrep alone) against v7 at
// 16/32, 4 x 8192 and 8 x 1024 (median of 7).
//
// Bounds: chunked_prefill_test.cc's bars for v7 (bf16 operands: o 1e-2
// max_abs_rel, 6e-3 rel_l2; fp16 operands 2e-3 / 1.5e-3; bf16 pages add
// 2^-8 / 2^-9 to the state's) for both W' variants, and the default no worse
// than 1.5 x v7's rel_l2 (+1e-6)
// on the same inputs (the design's bar: at least as accurate as v7; the
// 1.5 allows for the different rounding order of the same operand
// precision). Skips without a CUDA device.
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
#include "kernels/cuda/chunked/fused_chunk.h"
#include "kernels/cuda/chunked/tprep.h"
#include "kernels/cuda/chunked/tprep_args.h"
#include "kernels/cuda/chunked_prefill.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"
#include "kernels/oracle/gdn_oracle.h"

namespace gdn::cuda::chunked {
namespace {

constexpr int kK = 128, kV = 128;

enum class Gate { kMild, kNone, kStrong, kQwen };
enum class Init { kPage, kZero, kMixed };  // kMixed: even sequences from a page

struct Case {
  std::string name;
  DType dtype;
  int Hqk, Hv;
  std::vector<int> lens;
  Gate gate;
  Init init = Init::kPage;
  StateDType state = StateDType::kF32;
  bool l2 = true;
  bool all_equal = false;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

bool HaveDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

uint16_t ToBits(double x, DType dt) {
  if (dt == DType::kBF16) {
    const __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(x));
    return *reinterpret_cast<const uint16_t*>(&h);
  }
  const __half h = __float2half_rn(static_cast<float>(x));
  return *reinterpret_cast<const uint16_t*>(&h);
}
float FromBits(uint16_t b, DType dt) {
  if (dt == DType::kBF16) {
    __nv_bfloat16 h;
    *reinterpret_cast<uint16_t*>(&h) = b;
    return __bfloat162float(h);
  }
  __half h;
  *reinterpret_cast<uint16_t*>(&h) = b;
  return __half2float(h);
}

#define CUDA_OK(x)                                                             \
  do {                                                                         \
    const cudaError_t e_ = (x);                                                \
    ASSERT_EQ(e_, cudaSuccess) << #x << ": " << cudaGetErrorString(e_);        \
  } while (0)

// A device buffer freed at scope exit.
struct Buf {
  void* ptr = nullptr;
  Buf() = default;
  explicit Buf(size_t bytes) {
    if (cudaMalloc(&ptr, bytes == 0 ? 256 : bytes) != cudaSuccess) ptr = nullptr;
  }
  template <typename T>
  explicit Buf(const std::vector<T>& v) : Buf(v.size() * sizeof(T)) {
    if (ptr != nullptr && !v.empty()) {
      cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
    }
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf& operator=(Buf&& other) noexcept {
    if (this != &other) {
      if (ptr != nullptr) cudaFree(ptr);
      ptr = other.ptr;
      other.ptr = nullptr;
    }
    return *this;
  }
  ~Buf() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

struct Errors {
  double max_abs_rel = 0, rel_l2 = 0;
  int64_t nonfinite = 0;
};
Errors Compare(const std::vector<float>& got, const std::vector<double>& want, size_t begin,
               size_t count) {
  Errors e;
  double max_ref = 0, max_err = 0, ss_ref = 0, ss_err = 0;
  for (size_t i = begin; i < begin + count; ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    if (!std::isfinite(got[i])) ++e.nonfinite;
    max_ref = std::max(max_ref, std::fabs(want[i]));
    max_err = std::max(max_err, std::fabs(d));
    ss_ref += want[i] * want[i];
    ss_err += d * d;
  }
  e.max_abs_rel = max_ref > 0 ? max_err / max_ref : max_err;
  e.rel_l2 = ss_ref > 0 ? std::sqrt(ss_err / ss_ref) : std::sqrt(ss_err);
  if (e.nonfinite > 0) e.max_abs_rel = e.rel_l2 = INFINITY;
  return e;
}
// Worst over a list (per-sequence states).
void Worse(Errors& into, const Errors& e) {
  into.max_abs_rel = std::max(into.max_abs_rel, e.max_abs_rel);
  into.rel_l2 = std::max(into.rel_l2, e.rel_l2);
  into.nonfinite += e.nonfinite;
}

struct Tolerance {
  double max_abs_rel, rel_l2;
};
Tolerance OutputTolerance(DType dt) {
  return dt == DType::kF16 ? Tolerance{2e-3, 1.5e-3} : Tolerance{1e-2, 6e-3};
}
Tolerance StateTolerance(DType dt, StateDType st) {
  Tolerance t = OutputTolerance(dt);
  if (st == StateDType::kBF16) {
    t.max_abs_rel += std::ldexp(1.0, -8);
    t.rel_l2 += std::ldexp(1.0, -9);
  }
  return t;
}

// One problem on the host and the device: inputs, oracle inputs, device
// tensors, the pool (pages 0 .. N-1 initial, N .. 2N-1 final).
struct Problem {
  GdnOptions options;
  oracle::Inputs in;
  std::vector<int32_t> cu;
  int N = 0, T = 0, C = 0;
  size_t page_bytes = 0;
  std::vector<int32_t> initial_pages, final_pages;
  Buf q, k, v, o, g, beta, a, b, A_log, dt_bias, cu_d, table, ip_d, fp_d, pool, ws;

  ChunkArgs Args() const {
    ChunkArgs args;
    args.q = q.ptr;
    args.k = k.ptr;
    args.v = v.ptr;
    args.o = o.ptr;
    args.g = g.as<float>();
    args.beta = beta.as<float>();
    args.a = a.as<float>();
    args.b = b.as<float>();
    args.A_log = A_log.as<float>();
    args.dt_bias = dt_bias.as<float>();
    args.cu_seqlens = cu_d.as<int32_t>();
    args.chunk_table = table.as<int32_t>();
    args.initial_pages = ip_d.as<int32_t>();
    args.final_pages = fp_d.as<int32_t>();
    args.pool_base = pool.as<char>();
    args.page_bytes = static_cast<int64_t>(page_bytes);
    args.num_pages = 2 * N;
    args.num_seqs = N;
    args.num_chunks = C;
    args.num_qk_heads = options.shape.num_qk_heads;
    args.num_v_heads = options.shape.num_v_heads;
    args.group_size = options.shape.group_size();
    args.scale = options.effective_scale();
    args.fused_gating = options.gating == GatingMode::kFused;
    args.l2_norm_qk = options.l2_norm_qk;
    args.io_dtype = options.input_dtype;
    args.state_dtype = options.state_dtype;
    return args;
  }

  GdnParams Params() const {
    GdnParams p;
    p.num_seqs = N;
    p.total_tokens = T;
    p.cu_seqlens = cu_d.as<int32_t>();
    p.cu_seqlens_host = cu.data();
    p.q = q.ptr;
    p.k = k.ptr;
    p.v = v.ptr;
    p.o = o.ptr;
    if (options.gating == GatingMode::kFused) {
      p.a = a.as<float>();
      p.b = b.as<float>();
      p.A_log = A_log.as<float>();
      p.dt_bias = dt_bias.as<float>();
    } else {
      p.g = g.as<float>();
      p.beta = beta.as<float>();
    }
    p.initial_pages = ip_d.as<int32_t>();
    p.final_pages = fp_d.as<int32_t>();
    p.pool.base = pool.ptr;
    p.pool.page_bytes = static_cast<int64_t>(page_bytes);
    p.pool.num_pages = 2 * N;
    p.pool.dtype = options.state_dtype;
    return p;
  }
};

// Draws the case's inputs (and the oracle's copy of them) and uploads them.
void MakeProblem(const Case& cs, Problem& pr) {
  const int Hqk = cs.Hqk, Hv = cs.Hv;
  const DType dt = cs.dtype;
  GdnOptions& op = pr.options;
  op.shape.num_qk_heads = Hqk;
  op.shape.num_v_heads = Hv;
  op.shape.head_dim_k = kK;
  op.shape.head_dim_v = kV;
  op.input_dtype = dt;
  op.state_dtype = cs.state;
  op.gating = cs.gate == Gate::kQwen ? GatingMode::kFused : GatingMode::kDirect;
  op.l2_norm_qk = cs.l2;
  pr.N = static_cast<int>(cs.lens.size());
  pr.cu.assign(pr.N + 1, 0);
  for (int s = 0; s < pr.N; ++s) pr.cu[s + 1] = pr.cu[s] + cs.lens[s];
  pr.T = pr.cu[pr.N];
  pr.C = 0;
  for (int s = 0; s < pr.N; ++s) pr.C += (cs.lens[s] + 63) / 64;

  uint64_t seed = 0xcbf29ce484222325ull;  // FNV-1a of the case name
  for (const char ch : cs.name) seed = (seed ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uni(0.0, 1.0);

  const double amp = cs.l2 ? 1.0 : 1.0 / std::sqrt(static_cast<double>(kK));
  const size_t qk_size = static_cast<size_t>(pr.T) * Hqk * kK;
  const size_t v_size = static_cast<size_t>(pr.T) * Hv * kV;
  std::vector<uint16_t> qb(qk_size), kb(qk_size), vb(v_size);
  oracle::Inputs& in = pr.in;
  in.cu_seqlens = pr.cu;
  in.q.resize(qk_size);
  in.k.resize(qk_size);
  in.v.resize(v_size);
  // all_equal: every token of a sequence repeats the sequence's first token.
  for (int s = 0; s < pr.N; ++s) {
    for (int t = pr.cu[s]; t < pr.cu[s + 1]; ++t) {
      const bool copy = cs.all_equal && t > pr.cu[s];
      for (size_t x = 0; x < static_cast<size_t>(Hqk) * kK; ++x) {
        const size_t at = static_cast<size_t>(t) * Hqk * kK + x;
        const size_t src = static_cast<size_t>(pr.cu[s]) * Hqk * kK + x;
        qb[at] = copy ? qb[src] : ToBits(amp * normal(rng), dt);
        kb[at] = copy ? kb[src] : ToBits(amp * normal(rng), dt);
        in.q[at] = FromBits(qb[at], dt);
        in.k[at] = FromBits(kb[at], dt);
      }
      for (size_t x = 0; x < static_cast<size_t>(Hv) * kV; ++x) {
        const size_t at = static_cast<size_t>(t) * Hv * kV + x;
        const size_t src = static_cast<size_t>(pr.cu[s]) * Hv * kV + x;
        vb[at] = copy ? vb[src] : ToBits(normal(rng), dt);
        in.v[at] = FromBits(vb[at], dt);
      }
    }
  }
  const size_t th = static_cast<size_t>(pr.T) * Hv;
  std::vector<float> g(th), beta(th), a(th), b(th), A_log(Hv), dt_bias(Hv);
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
    // Qwen3-Next: A in U(0, 16) i.e. A_log up to log 16 (the last head at it).
    A_log[h] = static_cast<float>(h == Hv - 1 ? std::log(16.0) : std::log(16.0 * uni(rng) + 1e-3));
    dt_bias[h] = static_cast<float>(1.0 + 0.5 * normal(rng));
  }
  if (cs.gate == Gate::kQwen) {
    in.a = a;
    in.b = b;
    in.A_log = A_log;
    in.dt_bias = dt_bias;
  } else {
    in.g = g;
    in.beta = beta;
  }

  // Pool: initial pages 0 .. N-1, final pages N .. 2N-1; every byte NaN-filled
  // first (0xFF) so that an unwritten final state shows.
  const StatePageLayout layout = StatePageLayout::For(op.shape, cs.state);
  pr.page_bytes = layout.page_bytes;
  std::vector<uint8_t> pool(pr.page_bytes * 2 * pr.N, 0xFF);
  in.initial_states.assign(pr.N, {});
  pr.initial_pages.assign(pr.N, kZeroStatePage);
  pr.final_pages.resize(pr.N);
  const size_t elems = static_cast<size_t>(Hv) * kK * kV;
  for (int s = 0; s < pr.N; ++s) {
    pr.final_pages[s] = pr.N + s;
    const bool from_page = cs.init == Init::kPage || (cs.init == Init::kMixed && s % 2 == 0);
    if (!from_page) continue;
    pr.initial_pages[s] = s;
    std::vector<float>& st = in.initial_states[s];
    st.resize(elems);
    uint8_t* page = pool.data() + pr.page_bytes * s;
    for (size_t e = 0; e < elems; ++e) {
      const double x = 0.5 * normal(rng);
      if (cs.state == StateDType::kF32) {
        const float f = static_cast<float>(x);
        reinterpret_cast<float*>(page)[e] = f;
        st[e] = f;
      } else {
        const uint16_t bits = ToBits(x, DType::kBF16);
        reinterpret_cast<uint16_t*>(page)[e] = bits;
        st[e] = FromBits(bits, DType::kBF16);
      }
    }
  }

  pr.q = Buf(qb.size() * 2);
  cudaMemcpy(pr.q.ptr, qb.data(), qb.size() * 2, cudaMemcpyHostToDevice);
  pr.k = Buf(kb.size() * 2);
  cudaMemcpy(pr.k.ptr, kb.data(), kb.size() * 2, cudaMemcpyHostToDevice);
  pr.v = Buf(vb.size() * 2);
  cudaMemcpy(pr.v.ptr, vb.data(), vb.size() * 2, cudaMemcpyHostToDevice);
  pr.o = Buf(vb.size() * 2);
  pr.g = Buf(g);
  pr.beta = Buf(beta);
  pr.a = Buf(a);
  pr.b = Buf(b);
  pr.A_log = Buf(A_log);
  pr.dt_bias = Buf(dt_bias);
  pr.cu_d = Buf(pr.cu);
  pr.table = Buf((pr.N + 1 + pr.C) * sizeof(int32_t));
  pr.ip_d = Buf(pr.initial_pages);
  pr.fp_d = Buf(pr.final_pages);
  pr.pool = Buf(pool);
  pr.ws = Buf(FusedChunkWorkspaceBytes(pr.C, Hqk, Hv));
}

// o [T, Hv, V] and the final pages' states [N][Hv K V] as floats.
struct Result {
  std::vector<float> o;
  std::vector<std::vector<float>> states;
};
bool ReadBack(const Problem& pr, Result& r) {
  const size_t v_size = static_cast<size_t>(pr.T) * pr.options.shape.num_v_heads * kV;
  std::vector<uint16_t> ob(v_size);
  if (cudaMemcpy(ob.data(), pr.o.ptr, v_size * 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
    return false;
  }
  r.o.resize(v_size);
  for (size_t i = 0; i < v_size; ++i) r.o[i] = FromBits(ob[i], pr.options.input_dtype);
  const size_t elems = static_cast<size_t>(pr.options.shape.num_v_heads) * kK * kV;
  std::vector<uint8_t> page(pr.page_bytes);
  r.states.assign(pr.N, std::vector<float>(elems));
  for (int s = 0; s < pr.N; ++s) {
    const char* src = pr.pool.as<char>() + pr.page_bytes * pr.final_pages[s];
    if (cudaMemcpy(page.data(), src, pr.page_bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
      return false;
    }
    for (size_t e = 0; e < elems; ++e) {
      r.states[s][e] = pr.options.state_dtype == StateDType::kF32
                           ? reinterpret_cast<const float*>(page.data())[e]
                           : FromBits(reinterpret_cast<const uint16_t*>(page.data())[e],
                                      DType::kBF16);
    }
  }
  return true;
}

// Errors of o and (worst over sequences) of the final states.
void Score(const Problem& pr, const Result& r, const oracle::Outputs& want, Errors& o_err,
           Errors& s_err) {
  o_err = Compare(r.o, want.o, 0, want.o.size());
  s_err = Errors{};
  for (int s = 0; s < pr.N; ++s) {
    Worse(s_err, Compare(r.states[s], want.final_states[s], 0, want.final_states[s].size()));
  }
}

cudaError_t RunV8(const Problem& pr, cudaStream_t stream, bool w_hi_lo = true) {
  FusedChunkOptions options;
  options.w_hi_lo = w_hi_lo;
  return LaunchFusedChunkPrefill(pr.Args(), kK, kV, pr.T, pr.ws.ptr,
                                 FusedChunkWorkspaceBytes(pr.C, pr.options.shape.num_qk_heads,
                                                          pr.options.shape.num_v_heads),
                                 stream, options);
}

class FusedChunkTest : public ::testing::TestWithParam<Case> {};

TEST_P(FusedChunkTest, MatchesFloat64AndV7) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const Case& cs = GetParam();
  Problem pr;
  MakeProblem(cs, pr);
  ASSERT_NE(pr.ws.ptr, nullptr);
  ASSERT_NE(pr.pool.ptr, nullptr);
  const oracle::Outputs want = oracle::Run(pr.options, pr.in);

  // v8, both W' precisions (default hi + lo; "W' Op" the single rounding):
  // o and the final pages NaN-filled first (every entry must be written).
  Errors o8, s8, o8op, s8op;
  for (const bool hi_lo : {true, false}) {
    CUDA_OK(cudaMemset(pr.o.ptr, 0xFF, static_cast<size_t>(pr.T) * cs.Hv * kV * 2));
    for (int s = 0; s < pr.N; ++s) {
      CUDA_OK(cudaMemset(pr.pool.as<char>() + pr.page_bytes * pr.final_pages[s], 0xFF,
                         pr.page_bytes));
    }
    CUDA_OK(RunV8(pr, nullptr, hi_lo));
    CUDA_OK(cudaDeviceSynchronize());
    Result v8;
    ASSERT_TRUE(ReadBack(pr, v8));
    Score(pr, v8, want, hi_lo ? o8 : o8op, hi_lo ? s8 : s8op);
  }

  // v7 on the same inputs (it rewrites o and the final pages).
  CUDA_OK(cudaMemset(pr.o.ptr, 0xFF, static_cast<size_t>(pr.T) * cs.Hv * kV * 2));
  Errors o7, s7;
  {
    ChunkedPrefill v7;
    const absl::Status st = v7.Run(pr.options, pr.Params(), nullptr);
    ASSERT_TRUE(st.ok()) << st;
    CUDA_OK(cudaDeviceSynchronize());
    Result r7;
    ASSERT_TRUE(ReadBack(pr, r7));
    Score(pr, r7, want, o7, s7);
  }

  std::printf("[ %s ] v8 o %.3g / %.3g state %.3g / %.3g | v8 W' Op o %.3g / %.3g state %.3g / "
              "%.3g | v7 o %.3g / %.3g state %.3g / %.3g (max_abs_rel / rel_l2)\n",
              cs.name.c_str(), o8.max_abs_rel, o8.rel_l2, s8.max_abs_rel, s8.rel_l2,
              o8op.max_abs_rel, o8op.rel_l2, s8op.max_abs_rel, s8op.rel_l2, o7.max_abs_rel,
              o7.rel_l2, s7.max_abs_rel, s7.rel_l2);
  const Tolerance ot = OutputTolerance(cs.dtype);
  const Tolerance stt = StateTolerance(cs.dtype, cs.state);
  // v7's bars for both variants; "no worse than v7" for the default.
  for (const bool hi_lo : {true, false}) {
    const Errors& oe = hi_lo ? o8 : o8op;
    const Errors& se = hi_lo ? s8 : s8op;
    SCOPED_TRACE(hi_lo ? "W' hi + lo (default)" : "W' Op");
    EXPECT_EQ(oe.nonfinite, 0) << "o: non-finite or unwritten entries";
    EXPECT_EQ(se.nonfinite, 0) << "state: non-finite or unwritten entries";
    EXPECT_LE(oe.max_abs_rel, ot.max_abs_rel) << "o";
    EXPECT_LE(oe.rel_l2, ot.rel_l2) << "o";
    EXPECT_LE(se.max_abs_rel, stt.max_abs_rel) << "state";
    EXPECT_LE(se.rel_l2, stt.rel_l2) << "state";
  }
  EXPECT_LE(o8.rel_l2, 1.5 * o7.rel_l2 + 1e-6) << "o: v8 less accurate than v7";
  EXPECT_LE(s8.rel_l2, 1.5 * s7.rel_l2 + 1e-6) << "state: v8 less accurate than v7";
}

std::vector<Case> Cases() {
  const DType bf = DType::kBF16, fp = DType::kF16;
  const StateDType f32 = StateDType::kF32, sb = StateDType::kBF16;
  return {
      {"len1_bf16", bf, 2, 4, {1}, Gate::kMild},
      {"len63_bf16", bf, 2, 4, {63}, Gate::kMild},
      {"len64_bf16", bf, 2, 4, {64}, Gate::kMild},
      {"len65_bf16", bf, 2, 4, {65}, Gate::kMild},
      {"len130_bf16_zero_page", bf, 2, 4, {130}, Gate::kMild, Init::kZero},
      {"len1000_bf16", bf, 2, 4, {1000}, Gate::kMild},
      {"len1000_fp16", fp, 2, 4, {1000}, Gate::kMild},
      {"len1_fp16_zero_page", fp, 1, 2, {1}, Gate::kMild, Init::kZero},
      {"varlen_bf16", bf, 2, 4, {1, 64, 130, 63, 200}, Gate::kMild, Init::kMixed},
      {"varlen_fp16_qwen", fp, 2, 6, {65, 1, 128, 300}, Gate::kQwen, Init::kMixed},
      {"allequal_bf16", bf, 1, 2, {200}, Gate::kMild, Init::kPage, f32, true, true},
      {"allequal_fp16", fp, 1, 2, {200}, Gate::kMild, Init::kPage, f32, true, true},
      {"allequal_nodecay_bf16", bf, 1, 2, {300}, Gate::kNone, Init::kZero, f32, true, true},
      {"strong_bf16", bf, 1, 3, {300}, Gate::kStrong},
      {"strong_fp16", fp, 1, 3, {300}, Gate::kStrong},
      {"qwen_bf16", bf, 2, 4, {500, 64}, Gate::kQwen},
      {"l2off_bf16", bf, 1, 2, {200}, Gate::kMild, Init::kPage, f32, false},
      {"l2off_fp16", fp, 1, 2, {200}, Gate::kMild, Init::kPage, f32, false},
      {"bf16state_bf16", bf, 2, 4, {300}, Gate::kMild, Init::kPage, sb},
      {"bf16state_fp16_qwen_varlen", fp, 2, 4, {1, 100, 64}, Gate::kQwen, Init::kMixed, sb},
      {"bf16state_bf16_zero_page", bf, 1, 2, {129}, Gate::kMild, Init::kZero, sb},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, FusedChunkTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// A sequence whose initial page id is outside the pool: its o is NaN and its
// final page is not written; the other sequence is unaffected.
TEST(FusedChunkPages, BadPageIdTouchesNoPage) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const Case cs{"bad_page", DType::kBF16, 1, 2, {100, 70}, Gate::kMild};
  Problem pr;
  MakeProblem(cs, pr);
  pr.initial_pages[0] = 2 * pr.N + 5;  // outside the pool
  pr.ip_d = Buf(pr.initial_pages);
  CUDA_OK(cudaMemset(pr.o.ptr, 0, static_cast<size_t>(pr.T) * cs.Hv * kV * 2));
  CUDA_OK(RunV8(pr, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  Result r;
  ASSERT_TRUE(ReadBack(pr, r));
  const size_t row = static_cast<size_t>(cs.Hv) * kV;
  int64_t finite0 = 0, nonfinite1 = 0;
  for (size_t i = 0; i < 100 * row; ++i) finite0 += std::isfinite(r.o[i]) ? 1 : 0;
  for (size_t i = 100 * row; i < 170 * row; ++i) nonfinite1 += std::isfinite(r.o[i]) ? 0 : 1;
  EXPECT_EQ(finite0, 0) << "sequence 0 (bad page): finite o entries";
  EXPECT_EQ(nonfinite1, 0) << "sequence 1: non-finite o entries";
  // Final page of sequence 0 still the 0xFF fill (NaN), of sequence 1 written.
  int64_t written0 = 0, unwritten1 = 0;
  for (const float x : r.states[0]) written0 += std::isnan(x) ? 0 : 1;
  for (const float x : r.states[1]) unwritten1 += std::isfinite(x) ? 0 : 1;
  EXPECT_EQ(written0, 0) << "the bad sequence's final page was written";
  EXPECT_EQ(unwritten1, 0);
}

// Later steps of the design are refused before any launch.
TEST(FusedChunkLaunch, RefusesUnsupported) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  ChunkArgs args;
  args.num_qk_heads = 2;
  args.num_v_heads = 4;
  args.group_size = 2;
  args.io_dtype = DType::kBF16;
  EXPECT_EQ(FusedChunkSupports(args, 128, 128), cudaSuccess);
  EXPECT_EQ(FusedChunkSupports(args, 64, 128), cudaErrorNotSupported);
  EXPECT_EQ(FusedChunkSupports(args, 128, 64), cudaErrorNotSupported);
  args.state_dtype = StateDType::kInt8;
  EXPECT_EQ(LaunchFusedChunkPrefill(args, 128, 128, 0, nullptr, 0, nullptr),
            cudaErrorNotSupported);
  args.state_dtype = StateDType::kFP8;
  EXPECT_EQ(FusedChunkSupports(args, 128, 128), cudaErrorNotSupported);
  args.state_dtype = StateDType::kBF16;
  args.checkpoint_interval = 64;
  EXPECT_EQ(FusedChunkSupports(args, 128, 128), cudaErrorNotSupported);
  args.checkpoint_interval = 0;
  args.io_dtype = DType::kF32;
  EXPECT_EQ(FusedChunkSupports(args, 128, 128), cudaErrorInvalidValue);
  args.io_dtype = DType::kBF16;
  EXPECT_EQ(LaunchFusedChunkPrefill(args, 128, 128, 0, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Median of `runs` timings (ms) of fn on the default stream.
template <typename Fn>
float MedianMs(Fn fn, int runs) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> ms;
  for (int r = 0; r < runs + 2; ++r) {  // two warm-up calls
    cudaEventRecord(start, nullptr);
    fn();
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    float x = 0;
    cudaEventElapsedTime(&x, start, stop);
    if (r >= 2) ms.push_back(x);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// First speed figures (not pass / fail): bf16 q/k/v, fp32 pages, initial
// state from a page, mild gates, L2 norm on; v8 = chunk table + TPrep +
// FusedChunkKernel, "TPrep" = LaunchTPrep alone, v7 = ChunkedPrefill::Run.
TEST(FusedChunkTiming, Rows) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const std::vector<std::pair<std::string, std::vector<int>>> rows = {
      {"16/32 4 x 8192", std::vector<int>(4, 8192)},
      {"16/32 8 x 1024", std::vector<int>(8, 1024)},
  };
  for (const auto& [name, lens] : rows) {
    const Case cs{"timing", DType::kBF16, 16, 32, lens, Gate::kMild};
    Problem pr;
    MakeProblem(cs, pr);
    ASSERT_NE(pr.ws.ptr, nullptr);
    CUDA_OK(RunV8(pr, nullptr, true));
    CUDA_OK(RunV8(pr, nullptr, false));
    CUDA_OK(cudaDeviceSynchronize());
    const float v8 = MedianMs([&] { (void)RunV8(pr, nullptr, true); }, 7);
    const float v8op = MedianMs([&] { (void)RunV8(pr, nullptr, false); }, 7);
    const ChunkArgs args = pr.Args();
    const TPrepWorkspace ws = TPrepLayout(pr.C, cs.Hqk, cs.Hv).At(pr.ws.ptr);
    const float tprep = MedianMs([&] { (void)LaunchTPrep(args, ws, kK, nullptr); }, 7);
    CUDA_OK(cudaGetLastError());
    ChunkedPrefill v7;
    const GdnParams params = pr.Params();
    ASSERT_TRUE(v7.Run(pr.options, params, nullptr).ok());
    const float t7 = MedianMs([&] { (void)v7.Run(pr.options, params, nullptr); }, 7);
    CUDA_OK(cudaDeviceSynchronize());
    // Per (chunk, head) step per SM: the fused kernel's time over the chunk
    // steps one CTA (SM) walks, units = N Hv CTAs over min(units, 132) SMs.
    const double steps_per_sm =
        static_cast<double>(pr.C) * cs.Hv / std::min(132.0, static_cast<double>(pr.N) * cs.Hv);
    std::printf("[ timing ] %s bf16 fp32-state: v8 form P %.3f ms (W' hi+lo) / %.3f ms (W' Op); "
                "TPrep alone %.3f ms; fused kernel by difference %.3f / %.3f ms = %.2f / %.2f us "
                "per (chunk, head) step per SM | v7 %.3f ms\n",
                name.c_str(), v8, v8op, tprep, v8 - tprep, v8op - tprep,
                (v8 - tprep) * 1e3 / steps_per_sm, (v8op - tprep) * 1e3 / steps_per_sm, t7);
  }
}

}  // namespace
}  // namespace gdn::cuda::chunked
