// The float64 model of storing a state in a page of any StateDType and
// loading it back: what the oracle feeds into the next call when a test
// follows a backend's decode chain through int8 / fp8 (or bf16) pages.
//
// For int8 / fp8 it re-derives every decision of kernels/state_quant.h in
// double precision, independently of the fp32 code paths: per group of
// format.scale_cols columns over all K rows, amax = max |x|, scale =
// fp32(amax / qmax), y = x / scale clamped to +-qmax, then y to the
// neighbouring codes (a table of the e4m3 values for fp8): to nearest
// (ties to the even code) or up when frac >= 1 - u with the same random
// bits as the kernels (state_quant.h ElementBits of the salt). A backend
// and this model can then differ only where the fp32 and float64 values of
// y fall on different sides of a rounding boundary: rare, one step.
// Test-only.
#ifndef GDN_KERNELS_ORACLE_QUANTIZED_ROUND_TRIP_H_
#define GDN_KERNELS_ORACLE_QUANTIZED_ROUND_TRIP_H_

#include <cstdint>
#include <vector>

#include "kernels/gdn_types.h"
#include "kernels/oracle/gdn_oracle.h"
#include "kernels/state_page_codec.h"

namespace gdn::oracle {

// state [Hv, K, V] (V fastest) -> the fp32 values the page holds after a
// store with salts[h] for head h (empty: 0) and a load. fp32: the nearest
// floats; bf16: nearest even.
std::vector<float> QuantizedRoundTrip(const StatePageFormat& format,
                                      const std::vector<double>& state,
                                      const std::vector<uint32_t>& salts);

// The salts a backend uses for a state stored after global token row t
// (state_quant.h RoundingSalt of that token's gates), one per value head.
std::vector<uint32_t> StoreSalts(const GdnOptions& options, const Inputs& inputs, int64_t t);

}  // namespace gdn::oracle

#endif  // GDN_KERNELS_ORACLE_QUANTIZED_ROUND_TRIP_H_
