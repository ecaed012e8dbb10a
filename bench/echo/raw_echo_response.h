// The raw echo's Forward answer, at the byte level (proto/forward_wire.h):
// the request's bytes are scanned in place only to learn its sequences (T,
// positions) and request_id; the response is encoded with o's payload as
// slices of one static buffer of zeros, so building it copies no byte of o.
// The same message as ProtoEchoResponse, byte for byte.
#ifndef GDN_BENCH_ECHO_RAW_ECHO_RESPONSE_H_
#define GDN_BENCH_ECHO_RAW_ECHO_RESPONSE_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstddef>

#include "absl/status/status.h"
#include "gdn/v1/gdn.pb.h"

namespace gdn::echo {

// Allocates and touches the static buffer o is sent from (`bytes`, rounded up
// to a page, at least 1 MiB), so the first call does not pay for it and o is
// read from real memory, as a server's output would be, not from the kernel's
// shared zero page. Safe to call more than once; only the first call sizes it.
void PrepareZeroBuffer(size_t bytes);

// Writes the answer to `request` into *response. InvalidArgument (response
// untouched) when the bytes are not a ForwardRequest. (An out-parameter:
// grpc::ByteBuffer has no move, and a copy allocates.)
absl::Status RawEchoResponse(const grpc::ByteBuffer& request, const v1::LayerConfig& config,
                             grpc::ByteBuffer* response);

// A ForwardResponse carrying only an error (ForwardStream's per-message
// failure): error_code and error_message, the request_id when known.
grpc::ByteBuffer RawErrorResponse(const absl::Status& status, uint64_t request_id);

}  // namespace gdn::echo

#endif  // GDN_BENCH_ECHO_RAW_ECHO_RESPONSE_H_
