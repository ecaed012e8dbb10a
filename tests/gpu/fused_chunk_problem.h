// The problems of tests/gpu/fused_chunk_test.cu (v8 chunked prefill, form
// P): a case's random inputs drawn on the host (rounded to the wire dtype),
// their copy for the float64 oracle, the device tensors, a state pool
// (pages 0 .. N-1 initial, N .. 2N-1 final), and the read-back and error
// statistics (max_abs_rel = max |got - ref| / max |ref|, rel_l2 =
// ||got - ref|| / ||ref||, as shared/GDN.md reports them). Test-only.
#ifndef GDN_TESTS_GPU_FUSED_CHUNK_PROBLEM_H_
#define GDN_TESTS_GPU_FUSED_CHUNK_PROBLEM_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/chunked/chunk_args.h"
#include "kernels/cuda/chunked/fused_chunk.h"
#include "kernels/cuda/chunked/launch.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"
#include "kernels/oracle/gdn_oracle.h"
#include "tests/gpu/input_bits.h"

namespace gdn::cuda::chunked::fused_chunk_test {

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
  // Timing only: q, k, v drawn from a table of 4096 normal values by a
  // cheap hash (the timing rows have ~10^8 elements), and no oracle copy.
  bool timing_only = false;
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

inline bool HaveDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

using gpu_test::FromBits;
using gpu_test::ToBits;

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
  // The first non-finite entry, else the largest error: its index and, for
  // the final states, its sequence (the test decodes them for the log).
  size_t worst = 0;
  int worst_seq = 0;
};
inline Errors Compare(const std::vector<float>& got, const std::vector<double>& want,
                      size_t begin, size_t count) {
  Errors e;
  double max_ref = 0, max_err = -1, ss_ref = 0, ss_err = 0;
  for (size_t i = begin; i < begin + count; ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    if (!std::isfinite(got[i])) {
      if (e.nonfinite == 0) e.worst = i;
      ++e.nonfinite;
    } else if (e.nonfinite == 0 && std::fabs(d) > max_err) {
      max_err = std::fabs(d);
      e.worst = i;
    }
    max_ref = std::max(max_ref, std::fabs(want[i]));
    ss_ref += want[i] * want[i];
    ss_err += d * d;
  }
  max_err = std::max(max_err, 0.0);
  e.max_abs_rel = max_ref > 0 ? max_err / max_ref : max_err;
  e.rel_l2 = ss_ref > 0 ? std::sqrt(ss_err / ss_ref) : std::sqrt(ss_err);
  if (e.nonfinite > 0) e.max_abs_rel = e.rel_l2 = INFINITY;
  return e;
}
// Worst over a list (per-sequence states); `seq` is e's sequence.
inline void Worse(Errors& into, const Errors& e, int seq) {
  if (e.nonfinite > 0 ? into.nonfinite == 0 : (into.nonfinite == 0 &&
                                               e.max_abs_rel > into.max_abs_rel)) {
    into.worst = e.worst;
    into.worst_seq = seq;
  }
  into.max_abs_rel = std::max(into.max_abs_rel, e.max_abs_rel);
  into.rel_l2 = std::max(into.rel_l2, e.rel_l2);
  into.nonfinite += e.nonfinite;
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

  // The launcher's arguments, as the router builds them (launch.h).
  ChunkArgs Args() const { return MakeChunkArgs(options, Params(), C, table.as<int32_t>()); }

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
inline void MakeProblem(const Case& cs, Problem& pr) {
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
  if (cs.timing_only) {
    std::vector<uint16_t> qk_table(4096), v_table(4096);
    for (int i = 0; i < 4096; ++i) {
      qk_table[i] = ToBits(amp * normal(rng), dt);
      v_table[i] = ToBits(normal(rng), dt);
    }
    uint64_t state = seed | 1;
    auto next = [&state] {  // xorshift64
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      return static_cast<size_t>(state >> 52);  // 12 bits
    };
    for (size_t x = 0; x < qk_size; ++x) {
      qb[x] = qk_table[next()];
      kb[x] = qk_table[next()];
    }
    for (size_t x = 0; x < v_size; ++x) vb[x] = v_table[next()];
  } else {
    in.q.resize(qk_size);
    in.k.resize(qk_size);
    in.v.resize(v_size);
  }
  // all_equal: every token of a sequence repeats the sequence's first token.
  for (int s = 0; s < pr.N && !cs.timing_only; ++s) {
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
inline bool ReadBack(const Problem& pr, Result& r) {
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
inline void Score(const Problem& pr, const Result& r, const oracle::Outputs& want, Errors& o_err,
           Errors& s_err) {
  o_err = Compare(r.o, want.o, 0, want.o.size());
  s_err = Errors{};
  for (int s = 0; s < pr.N; ++s) {
    Worse(s_err, Compare(r.states[s], want.final_states[s], 0, want.final_states[s].size()), s);
  }
}

}  // namespace gdn::cuda::chunked::fused_chunk_test

#endif  // GDN_TESTS_GPU_FUSED_CHUNK_PROBLEM_H_
