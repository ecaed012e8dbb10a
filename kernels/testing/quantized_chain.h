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
  ErrorStats o;            // every step's o (all sequences) vs the round-trip oracle
  ErrorStats final_state;  // the last page's values vs the round-trip oracle's
  ErrorStats o_vs_exact;   // o vs the oracle without any rounding of the state
  // The fraction of final-state elements farther than 1e-5 max|ref| from the
  // round-trip oracle's (a rounding that went the other way, or its
  // after-effects).
  double differing_fraction = 0;
};

// `inputs`: B sequences of n tokens each (sequence-major, initial states as
// given); `tokens_per_call` (1..8) tokens of each sequence per Decode call
// (n a multiple of it), or entry kPrefill with tokens_per_call = n for one
// call.
absl::StatusOr<ChainComparison> RunRoundTripChain(Backend& backend, const GdnOptions& options,
                                                  const oracle::Inputs& inputs,
                                                  int tokens_per_call, EntryPoint entry);

}  // namespace gdn::testing

#endif  // GDN_KERNELS_TESTING_QUANTIZED_CHAIN_H_
