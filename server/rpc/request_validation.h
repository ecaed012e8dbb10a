// Checks of a ForwardRequest that need no state: layer range, sequences,
// tensor dtypes and shapes against the layer configuration, finiteness and
// gating ranges. Pure; safe from any thread (the gRPC handlers call it).
//
// Every failure is InvalidArgument naming the field and what was expected,
// e.g. "sequences[1].num_tokens: must be >= 1, got 0" or
// "v: expected shape [5, 4, 64] (bf16), got [5, 4, 32]".
#ifndef GDN_SERVER_RPC_REQUEST_VALIDATION_H_
#define GDN_SERVER_RPC_REQUEST_VALIDATION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "gdn/v1/gdn.pb.h"
#include "kernels/gdn_types.h"
#include "server/engine/forward_call.h"

namespace gdn {

struct ValidatedForward {
  int32_t layer = 0;
  std::vector<ForwardSequence> sequences;  // row offsets filled in
  int32_t total_tokens = 0;                // T
};

// `options` are the server's (activation dtype, shape, gating mode).
//   q, k: [T, Hqk, K]; v: [T, Hv, V] (activation dtype)
//   direct: g [T, Hv] fp32 (<= 0), beta [T, Hv] fp32 (in [0, 1])
//   fused:  a, b [T, Hv] fp32; a_log, dt_bias [Hv] fp32
// The other mode's tensors must be absent. All values finite.
absl::StatusOr<ValidatedForward> ValidateForwardRequest(
    const gdn::v1::ForwardRequest& request, int num_layers,
    const GdnOptions& options);

}  // namespace gdn

#endif  // GDN_SERVER_RPC_REQUEST_VALIDATION_H_
