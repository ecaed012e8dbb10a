// Builds gdn.v1 ForwardRequests from oracle inputs (test-only), so a test can
// send exactly what the oracle sees.
#ifndef GDN_TESTS_SERVER_RPC_FORWARD_REQUEST_BUILDER_H_
#define GDN_TESTS_SERVER_RPC_FORWARD_REQUEST_BUILDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gdn/v1/gdn.pb.h"
#include "kernels/gdn_types.h"
#include "kernels/oracle/gdn_oracle.h"
#include "proto/tensor_codec.h"

namespace gdn::testing {

struct SeqSpec {
  std::string session;
  int64_t position = 0;
};

// One sequence per spec, with inputs.cu_seqlens' lengths. q, k, v in the
// activation dtype (inputs must already be rounded to it); gating tensors of
// options.gating.
inline gdn::v1::ForwardRequest BuildForwardRequest(
    const GdnOptions& options, int32_t layer, const std::vector<SeqSpec>& specs,
    const oracle::Inputs& in) {
  const LayerShape& s = options.shape;
  const int64_t T = in.total_tokens();
  gdn::v1::ForwardRequest r;
  r.set_layer(layer);
  for (size_t i = 0; i < specs.size(); ++i) {
    gdn::v1::SequenceSpec* seq = r.add_sequences();
    seq->set_session_id(specs[i].session);
    seq->set_position(specs[i].position);
    seq->set_num_tokens(in.cu_seqlens[i + 1] - in.cu_seqlens[i]);
  }
  *r.mutable_q() = wire::MakeTensor(options.input_dtype,
                                    {T, s.num_qk_heads, s.head_dim_k}, in.q.data());
  *r.mutable_k() = wire::MakeTensor(options.input_dtype,
                                    {T, s.num_qk_heads, s.head_dim_k}, in.k.data());
  *r.mutable_v() = wire::MakeTensor(options.input_dtype,
                                    {T, s.num_v_heads, s.head_dim_v}, in.v.data());
  if (options.gating == GatingMode::kDirect) {
    *r.mutable_g() = wire::MakeTensor(DType::kF32, {T, s.num_v_heads}, in.g.data());
    *r.mutable_beta() =
        wire::MakeTensor(DType::kF32, {T, s.num_v_heads}, in.beta.data());
  } else {
    *r.mutable_a() = wire::MakeTensor(DType::kF32, {T, s.num_v_heads}, in.a.data());
    *r.mutable_b() = wire::MakeTensor(DType::kF32, {T, s.num_v_heads}, in.b.data());
    *r.mutable_a_log() =
        wire::MakeTensor(DType::kF32, {s.num_v_heads}, in.A_log.data());
    *r.mutable_dt_bias() =
        wire::MakeTensor(DType::kF32, {s.num_v_heads}, in.dt_bias.data());
  }
  return r;
}

}  // namespace gdn::testing

#endif  // GDN_TESTS_SERVER_RPC_FORWARD_REQUEST_BUILDER_H_
