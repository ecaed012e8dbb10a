#include "bench/echo/proto_echo_response.h"

#include <cstdint>

#include "kernels/gdn_types.h"
#include "proto/tensor_codec.h"

namespace gdn::echo {

void ProtoEchoResponse(const v1::ForwardRequest& request, const v1::LayerConfig& config,
                       v1::ForwardResponse* response) {
  response->Clear();
  int64_t tokens = 0;
  for (const v1::SequenceSpec& s : request.sequences()) {
    tokens += s.num_tokens();
    response->add_positions(s.position() + s.num_tokens());
  }
  DType dtype = DType::kBF16;
  wire::FromProtoDType(config.activation_dtype(), &dtype);
  v1::Tensor* o = response->mutable_o();
  o->set_dtype(config.activation_dtype());
  o->add_shape(tokens);
  o->add_shape(config.num_v_heads());
  o->add_shape(config.head_dim_v());
  o->mutable_data()->resize(static_cast<size_t>(tokens) * config.num_v_heads() *
                            config.head_dim_v() * DTypeSize(dtype));
  response->set_request_id(request.request_id());
}

}  // namespace gdn::echo
