// Fresh random operator inputs for tests and benchmarks (shared/GDN.md,
// "Numerics and how to test"): q, k ~ randn, v ~ randn, gating per profile,
// random initial states, all rounded to the dtypes the kernel will see so the
// oracle and the backend start from the very same numbers. Test-only.
#ifndef GDN_KERNELS_TESTING_GDN_TEST_INPUTS_H_
#define GDN_KERNELS_TESTING_GDN_TEST_INPUTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/gdn_params.h"
#include "kernels/gdn_types.h"
#include "kernels/oracle/gdn_oracle.h"
#include "kernels/testing/error_stats.h"

namespace gdn::testing {

enum class GateProfile {
  kRandom,       // g = logsigmoid(randn)/16, beta = sigmoid(randn)
  kNoDecay,      // g = 0 exactly
  kStrongDecay,  // g very negative (-5..-20)
  kBetaZero,     // beta = 0 exactly (state only decays)
  kBetaOne,      // beta = 1 exactly (full overwrite along k)
};
const char* GateProfileName(GateProfile profile);

// Fresh random inputs: q, k ~ randn (L2-normalised when !options.l2_norm_qk,
// raw otherwise so the in-kernel norm matters), v ~ randn, gating per profile
// (for kFused: random a, b, A_log, dt_bias that give comparable g, beta; the
// exact-0 / exact-1 profiles saturate softplus / sigmoid so that fp32 gives
// exactly 0 / 1), q/k/v rounded to options.input_dtype; initial states random
// (magnitude like a real state) and rounded to options.state_dtype when
// random_initial_state, else empty.
//
// Deterministic in `seed` (and the shapes), whatever the number of threads:
// each tensor is drawn in fixed blocks of about 2^16 values, every block from
// its own std::mt19937_64 seeded from (seed, tensor, block index) through a
// SplitMix64 mixer. Large tensors fill their blocks on several threads; the
// values are the same as a serial fill. Callers may rely on the distribution
// and on this determinism, not on particular values.
oracle::Inputs MakeRandomInputs(const GdnOptions& options,
                                const std::vector<int>& seq_lens, uint64_t seed,
                                bool random_initial_state,
                                GateProfile profile = GateProfile::kRandom);

// Extreme magnitudes (shared/GDN.md, "huge / tiny magnitudes"): row r of q
// (rows [T * Hqk] of K values) is rescaled so that its largest |x| becomes
// q_max[r % q_max.size()], row r of k likewise by k_max (0: the row stays as
// drawn; an empty list changes nothing), then rounded to options.input_dtype.
// E.g. {0, 1e20f, 3e38f, 1e-30f}: sum(x^2) of such rows overflows or
// underflows fp32, which the kernels' L2 norm must survive.
void SetQkRowMagnitudes(const GdnOptions& options,
                        const std::vector<float>& q_max,
                        const std::vector<float>& k_max,
                        oracle::Inputs* inputs);

// Tokens [begin, end) of sequence `seq` (positions within the sequence) as a
// one-sequence input, starting from `initial_state` ([Hv, K, V] or empty).
oracle::Inputs SliceSequence(const GdnOptions& options,
                             const oracle::Inputs& inputs, int seq, int begin,
                             int end, std::vector<float> initial_state);

// One batch of the given one-or-more-sequence inputs, in order.
oracle::Inputs ConcatSequences(const std::vector<oracle::Inputs>& parts);

// The oracle's prefix states at a checkpoint interval (GdnParams::
// checkpoint_interval): [N][CheckpointCount(len_i, interval)][Hv * K * V],
// entry m - 1 the state after sequence i's first m * interval tokens (every
// prefix run as a sequence of its own, in one oracle call).
std::vector<std::vector<std::vector<double>>> OracleCheckpointStates(
    const GdnOptions& options, const oracle::Inputs& inputs, int32_t interval);

// The worst error (largest of each measure, all non-finite values counted)
// over the checkpoint states `got` holds ([N][count][Hv * K * V], as
// BackendOutputs::checkpoint_states; empty entries, skipped slots, left out)
// against `want` (OracleCheckpointStates). InvalidArgument when the counts
// differ.
absl::StatusOr<ErrorStats> CompareCheckpointStates(
    const std::vector<std::vector<std::vector<float>>>& got,
    const std::vector<std::vector<std::vector<double>>>& want);

// Rounds values through the state dtype (what storing a state page does).
// fp32 / bf16 only (aborts for int8 / fp8, whose round trip needs the shape:
// use the overload below).
void RoundThroughState(StateDType dtype, std::vector<float>* values);
// A state [Hv, K, V] through a page of options.state_dtype, any dtype; int8 /
// fp8 round to nearest (how tests stage initial states: storing the result
// again gives back the same values, to fp32 rounding of the scales).
void RoundThroughState(const GdnOptions& options, std::vector<float>* state);

// The fp32 view of a float64 vector (for feeding one call's oracle final
// states into the next call as initial states).
std::vector<float> ToFloat(const std::vector<double>& values);

}  // namespace gdn::testing

#endif  // GDN_KERNELS_TESTING_GDN_TEST_INPUTS_H_
