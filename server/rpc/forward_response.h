// Forward responses as gRPC byte buffers (unary and stream alike), encoded
// around o's bytes where they lie: the engine's output blocks become slices
// of the message, so no byte of o is copied to send it (forward_wire.h).
#ifndef GDN_SERVER_RPC_FORWARD_RESPONSE_H_
#define GDN_SERVER_RPC_FORWARD_RESPONSE_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/gdn_types.h"
#include "server/engine/forward_call.h"

namespace gdn {

// o [T, Hv, V] in the activation dtype, the new positions, the request id.
grpc::ByteBuffer EncodeForwardResult(ForwardResult result, int64_t total_tokens,
                                     const GdnOptions& options, uint64_t request_id);
// ForwardStream's per-message error: error_code / error_message (and the
// request id) only.
grpc::ByteBuffer EncodeForwardError(const absl::Status& status, uint64_t request_id);

}  // namespace gdn

#endif  // GDN_SERVER_RPC_FORWARD_RESPONSE_H_
