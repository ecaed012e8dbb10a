// The proto echo's Forward answer: what a server must at least do with a
// parsed ForwardRequest, and nothing more. o is [T, Hv, V] of the activation
// dtype (T = sum of num_tokens), its data a freshly sized string of zeros
// that protobuf then copies into the message; positions are position +
// num_tokens per sequence; request_id is echoed.
#ifndef GDN_BENCH_ECHO_PROTO_ECHO_RESPONSE_H_
#define GDN_BENCH_ECHO_PROTO_ECHO_RESPONSE_H_

#include "gdn/v1/gdn.pb.h"

namespace gdn::echo {

// Fills `response` (cleared first).
void ProtoEchoResponse(const v1::ForwardRequest& request, const v1::LayerConfig& config,
                       v1::ForwardResponse* response);

}  // namespace gdn::echo

#endif  // GDN_BENCH_ECHO_PROTO_ECHO_RESPONSE_H_
