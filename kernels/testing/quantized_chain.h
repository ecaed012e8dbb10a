// A decode chain through a backend's state pages checked against the float64
// oracle of the stored state's round trip (kernels/oracle/
// quantized_round_trip.h), for any state dtype: every call's final state is
// stored in a page and read back by the next call, and the oracle follows
// the same path in float64 (each call from the values the page held, its
// final state rounded as the backend stores it, same random bits). What is
// left between them is fp32 arithmetic and the rare element whose rounding
// went the other way. Test-only (cpu and gpu tests share it).
#ifndef GDN_KERNELS_TESTING_QUANTIZED_CHAIN_H_
#define GDN_KERNELS_TESTING_QUANTIZED_CHAIN_H_

#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/gdn_types.h"
#include "kernels/oracle/gdn_oracle.h"
#include "kernels/testing/backend_runner.h"
#include "kernels/testing/error_stats.h"

namespace gdn::testing {

struct ChainComparison {
  // The chain: the backend's steps against the round-trip oracle's own chain.
  // A rounding that went the other way at one step stays in both chains'
  // states for the decay memory (the after-effects), so these measure drift.
  ErrorStats o;            // every step's o (all sequences) vs the round-trip oracle
  ErrorStats final_state;  // the last page's values vs the round-trip oracle's
  ErrorStats o_vs_exact;   // o vs the oracle without any rounding of the state
  // Each step alone: the oracle run from the very pages the backend read, so
  // no earlier rounding separates them. step_o: o against it (max_abs_rel
  // the largest of any call, rel_l2 over all calls): the output dtype's
  // rounding and fp32 arithmetic, nothing of the state's codec.
  // step_flip_fraction: of all stored elements of all steps, those farther
  // than 1e-5 max|ref| of their call from the round trip of that oracle's
  // state (this step's roundings that went the other way).
  ErrorStats step_o;
  double step_flip_fraction = 0;
};

// Bars on the per-step figures, for any state dtype and rounding (measured on
// the cpu backend over 200-300 fresh seeds per case, 2026-12-05: step_o.max_abs_rel
// up to 3.89e-3 with bf16 outputs, step_flip_fraction up to 2.6e-5).
// step_o.max_abs_rel: the output dtype's unit roundoff (an element's rounding
// is at most that of itself, so of the call's max) plus 1e-4 for fp32 sums.
double StepOBar(DType out);
// step_flip_fraction: a rounding goes the other way only where fp32 and
// float64 straddle a code boundary (a few in 10^6 elements); a wrong rounding
// mode or random stream moves a large fraction of all codes.
inline constexpr double kStepFlipBar = 1e-3;
// The chain's drift bars in L2. o: the output dtype's rounding (1.6e-3 for
// 16-bit activations, 1e-4 for fp32) plus the rare state element rounded the
// other way (one step: 1/127 of its group's max for int8, 1/16 - 1/8 of
// itself for fp8) over its decay memory; the state: those elements alone.
double ChainOBar(const GdnOptions& options);
double ChainStateBar(StateDType state);
// The drift bars above times this: one rounding that went the other way
// perturbs its column at the next step, and each perturbed element may
// round the other way in turn, so on a small state (2 heads of 64 x 64) the
// drift has a long tail; over 200 fresh seeds per case on the cpu backend it
// reached 0.93 of the bars (gdn-chain-bars).
inline constexpr double kChainMargin = 2.0;

// The decode chains of the device test (tests/gpu/quantized_state_test.cc)
// and of gdn-chain-bars: awkward batch sizes and shapes, bf16 and fp32
// activations; each run with int8 and fp8 pages, both roundings and both
// gatings, one token per call over 12 tokens.
struct ChainCase {
  int hqk, hv, k, v, batch;
  DType input;
};
std::vector<ChainCase> DecodeChainCases();
inline constexpr int kDecodeChainTokens = 12;
GdnOptions ChainCaseOptions(const ChainCase& c, StateDType state, StateRounding rounding,
                            GatingMode gating);

// `inputs`: B sequences of n tokens each (sequence-major, initial states as
// given); `tokens_per_call` (1..8) tokens of each sequence per Decode call
// (n a multiple of it), or entry kPrefill with tokens_per_call = n for one
// call.
absl::StatusOr<ChainComparison> RunRoundTripChain(Backend& backend, const GdnOptions& options,
                                                  const oracle::Inputs& inputs,
                                                  int tokens_per_call, EntryPoint entry);

}  // namespace gdn::testing

#endif  // GDN_KERNELS_TESTING_QUANTIZED_CHAIN_H_
