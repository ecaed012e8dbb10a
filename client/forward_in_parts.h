// A Forward of any size as one call over ParallelForwardStreams: the
// request split at `part_bytes` (client/forward_parts_split.h: parts
// reference sub-ranges of the caller's tensors, no byte copied), its parts
// over the connections in turn (the pieces of a cut sequence too; the
// server applies them in order), and each part's o copied where the whole
// call's o would be: what gdn-bench --connections sends, for a caller that
// wants o back (a C++ model runner).
//
// On failure the first failing part's error, in part order, its message
// naming the part; parts after it may have been applied (ParallelForwardStreams:
// the sessions' positions on the server tell).
#ifndef GDN_CLIENT_FORWARD_IN_PARTS_H_
#define GDN_CLIENT_FORWARD_IN_PARTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "client/parallel_forward_streams.h"
#include "proto/forward_wire.h"

namespace gdn::client {

// `o`: the whole call's o, [T, Hv, V] in the request's token order: exactly
// as many bytes as the request's v, which must be inline (InvalidArgument
// otherwise, nothing sent); o comes back inline (no o region). `positions`:
// each sequence's position after the call. request_id is set per part.
absl::Status ForwardInParts(ParallelForwardStreams& streams, wire::ForwardRequestParts request,
                            int64_t part_bytes, absl::Span<char> o,
                            std::vector<int64_t>* positions);

}  // namespace gdn::client

#endif  // GDN_CLIENT_FORWARD_IN_PARTS_H_
