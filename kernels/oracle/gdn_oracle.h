// The float64 reference of the Gated DeltaNet operator (shared/GDN.md): the
// plain recurrence, one token at a time, in double precision. Every backend is
// compared to it. Test-only: slow (O(T Hv K V)) and allocation-happy.
//
// Inputs are the fp32 values exactly as a kernel sees them, i.e. already
// rounded to the wire dtype (q, k, v) and to the state dtype (initial states);
// everything after that (L2 norm, fused gating, the recurrence) is float64.
#ifndef GDN_KERNELS_ORACLE_GDN_ORACLE_H_
#define GDN_KERNELS_ORACLE_GDN_ORACLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/gdn_types.h"

namespace gdn::oracle {

// Inputs as fp32 values exactly as a kernel sees them (already rounded to the
// wire dtype).
struct Inputs {
  std::vector<int32_t> cu_seqlens;                 // [N + 1]
  std::vector<float> q, k;                         // [T, Hqk, K]
  std::vector<float> v;                            // [T, Hv, V]
  std::vector<float> g, beta;                      // [T, Hv]  (GatingMode::kDirect)
  std::vector<float> a, b;                         // [T, Hv]  (GatingMode::kFused)
  std::vector<float> A_log, dt_bias;               // [Hv]     (GatingMode::kFused)
  std::vector<std::vector<float>> initial_states;  // [N], each empty (zero state) or [Hv, K, V]

  int num_seqs() const { return static_cast<int>(cu_seqlens.size()) - 1; }
  int total_tokens() const { return cu_seqlens.empty() ? 0 : cu_seqlens.back(); }
};

struct Outputs {
  std::vector<double> o;                           // [T, Hv, V]
  std::vector<std::vector<double>> final_states;   // [N][Hv * K * V]
};

// The recurrence of shared/GDN.md in float64 (L2 norm, fused gating, GVA,
// scale as the options say). Any positive K and V are accepted (the backends
// restrict them to 64 / 128; the oracle's own tests use K = V = 1 or 2).
// Aborts with a message on inconsistent inputs (a test bug); RunChecked
// returns the error instead.
Outputs Run(const GdnOptions& options, const Inputs& inputs);
absl::StatusOr<Outputs> RunChecked(const GdnOptions& options,
                                   const Inputs& inputs);

// The per-token gating in float64, as the oracle computes it.
double FusedDecay(double a, double A_log, double dt_bias);  // -exp(A_log) * softplus(a + dt_bias)
double FusedBeta(double b);                                 // sigmoid(b)

}  // namespace gdn::oracle

#endif  // GDN_KERNELS_ORACLE_GDN_ORACLE_H_
