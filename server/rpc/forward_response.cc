#include "server/rpc/forward_response.h"

#include <string>
#include <utility>

#include "proto/tensor_codec.h"
#include "server/rpc/grpc_status.h"

namespace gdn {

void SetForwardResponse(ForwardResult result, int64_t total_tokens,
                        const GdnOptions& options,
                        gdn::v1::ForwardResponse* response) {
  gdn::v1::Tensor* o = response->mutable_o();
  gdn::v1::DType dtype = gdn::v1::DTYPE_UNSPECIFIED;
  wire::ToProtoDType(options.input_dtype, &dtype);
  o->set_dtype(dtype);
  o->add_shape(total_tokens);
  o->add_shape(options.shape.num_v_heads);
  o->add_shape(options.shape.head_dim_v);
  o->set_data(std::move(result.o));
  for (int64_t position : result.positions) response->add_positions(position);
}

void SetErrorResponse(const absl::Status& status,
                      gdn::v1::ForwardResponse* response) {
  const grpc::Status grpc_status = ToGrpcStatus(status);
  response->clear_o();
  response->clear_positions();
  response->set_error_code(static_cast<int32_t>(grpc_status.error_code()));
  response->set_error_message(grpc_status.error_message());
}

}  // namespace gdn
