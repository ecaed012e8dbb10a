#include "server/rpc/forward_response.h"

#include <utility>

#include "proto/forward_wire.h"
#include "proto/tensor_codec.h"
#include "server/rpc/grpc_status.h"

namespace gdn {

grpc::ByteBuffer EncodeForwardResult(ForwardResult result, int64_t total_tokens,
                                     const GdnOptions& options, uint64_t request_id) {
  wire::ForwardResponseParts parts;
  wire::ToProtoDType(options.input_dtype, &parts.o.dtype);
  parts.o.shape = {total_tokens, options.shape.num_v_heads, options.shape.head_dim_v};
  parts.o.data = std::move(result.o);
  parts.positions = std::move(result.positions);
  parts.request_id = request_id;
  return wire::EncodeForwardResponse(parts);
}

grpc::ByteBuffer EncodeForwardError(const absl::Status& status, uint64_t request_id) {
  const grpc::Status grpc_status = ToGrpcStatus(status);
  wire::ForwardResponseParts parts;
  parts.request_id = request_id;
  parts.error_code = static_cast<int32_t>(grpc_status.error_code());
  parts.error_message = grpc_status.error_message();
  return wire::EncodeForwardResponse(parts);
}

}  // namespace gdn
