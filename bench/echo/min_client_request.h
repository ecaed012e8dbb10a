// gdn-min-client's one request: N sessions of T tokens each at the shape a
// server reports (q, k [N*T, Hqk, K] and v [N*T, Hv, V] in the activation
// dtype, g, beta [N*T, Hv] fp32), encoded once with wire::EncodeForwardRequest
// whose payloads all reference one static, touched buffer of zeros: building
// it copies nothing, and the same ByteBuffer is sent by every call.
#ifndef GDN_BENCH_ECHO_MIN_CLIENT_REQUEST_H_
#define GDN_BENCH_ECHO_MIN_CLIENT_REQUEST_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "gdn/v1/gdn.pb.h"

namespace gdn::echo {

struct MinRequestShape {
  int sessions = 1;  // sequences in the call, ids "min-0", "min-1", ...
  int tokens = 1;    // tokens per session
  int layer = 0;
};

// InvalidArgument for a shape below 1 or a config without a known dtype.
absl::StatusOr<grpc::ByteBuffer> BuildMinRequest(const v1::LayerConfig& config,
                                                 const MinRequestShape& shape);

// Bytes of o the answer carries: [N*T, Hv, V] of the activation dtype.
int64_t ExpectedOutputBytes(const v1::LayerConfig& config, const MinRequestShape& shape);

}  // namespace gdn::echo

#endif  // GDN_BENCH_ECHO_MIN_CLIENT_REQUEST_H_
