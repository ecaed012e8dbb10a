// The values an imported state may hold (ImportSession and --snapshot_dir
// restores, both through ImportAssembler). Forward checks its inputs (every
// value finite, g <= 0, beta in [0, 1]) so that bad input changes nothing;
// a state arrives on another path and needs the same care: a NaN or an
// infinity imported silently made the next Forward's `o` NaN (issue 21,
// defect 3).
//
// The bound. With the L2-normalised k of a GDN layer (|k| = 1), beta in
// [0, 1] and g <= 0, one token maps S to exp(g) (I - beta k k^T) S +
// beta k v^T, and I - beta k k^T has norm <= 1, so |S| grows by at most
// |v| per token: a state is bounded by the sum of |v| over the tokens it
// has seen. Real activations are far below 1e4, so even 1e9 tokens leave
// a state under 1e14; 1e30 is beyond anything a server computes, and it
// keeps the next Forward clear of overflow (S^T k and S^T q sum K <= 128
// products of a state element and a unit-norm entry: <= 1.3e32 << 3.4e38).
// Without l2_norm_qk the bound is a policy rather than a theorem; a state
// that large would overflow within a few tokens anyway.
#ifndef GDN_SERVER_SESSIONS_STATE_VALUES_H_
#define GDN_SERVER_SESSIONS_STATE_VALUES_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/gdn_types.h"

namespace gdn {

inline constexpr float kMaxStateMagnitude = 1e30f;

// OK when the Hv * K * V elements at the start of `bytes` (one state page,
// [Hv, K, V] of `dtype`, V fastest; padding after them is not looked at)
// are all finite with |x| <= kMaxStateMagnitude. For int8 / fp8 pages the
// fp32 scales after the codes (StatePageLayout) must also be finite and
// > 0, and every code one a server writes (int8 -127 .. 127, fp8 not NaN);
// the element values checked are code * scale. Else InvalidArgument naming
// `layer` and the first bad element (head, k, v) or scale (head, group);
// also when `bytes` is too short to hold them.
absl::Status CheckStateValues(absl::Span<const uint8_t> bytes, StateDType dtype,
                              int64_t num_v_heads, int64_t head_dim_k, int64_t head_dim_v,
                              int layer);

}  // namespace gdn

#endif  // GDN_SERVER_SESSIONS_STATE_VALUES_H_
