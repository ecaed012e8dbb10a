// Filling ForwardResponse messages (unary and stream alike).
#ifndef GDN_SERVER_RPC_FORWARD_RESPONSE_H_
#define GDN_SERVER_RPC_FORWARD_RESPONSE_H_

#include "absl/status/status.h"
#include "gdn/v1/gdn.pb.h"
#include "kernels/gdn_types.h"
#include "server/engine/forward_call.h"

namespace gdn {

// o [T, Hv, V] in the activation dtype, positions; request_id is left as is.
void SetForwardResponse(ForwardResult result, int64_t total_tokens,
                        const GdnOptions& options,
                        gdn::v1::ForwardResponse* response);
// ForwardStream's per-message error: error_code / error_message only.
void SetErrorResponse(const absl::Status& status,
                      gdn::v1::ForwardResponse* response);

}  // namespace gdn

#endif  // GDN_SERVER_RPC_FORWARD_RESPONSE_H_
