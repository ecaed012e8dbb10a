// The split of forward_split.h, on a request whose tensors are references
// (wire::ForwardRequestParts: payloads are BytesRef runs into the caller's
// memory): the parts reference sub-ranges of the same runs, so splitting
// copies no tensor byte. SplitForwardRequest is this split on a view of a
// message, so both give the same parts: a part takes rows [begin, end) of
// the packed tokens, a sequence cut by a part boundary appears in both parts
// (the second piece at position + tokens already sent), each part's request
// and response fit in max_message_bytes (kForwardMessageSlackBytes left for
// the fixed fields), a_log / dt_bias go whole into every part.
#ifndef GDN_CLIENT_FORWARD_PARTS_SPLIT_H_
#define GDN_CLIENT_FORWARD_PARTS_SPLIT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/forward_wire.h"

namespace gdn::client {

struct ForwardPartRefs {
  wire::ForwardRequestParts request;
  // For each sequence of `request`: the index of its sequence in the original.
  std::vector<int> original_sequence;
};

// Bytes of the encoded request: exactly wire::EncodeForwardRequest(parts)'s
// length (and protobuf's ByteSizeLong of the same message), without encoding.
int64_t ForwardRequestWireSize(const wire::ForwardRequestParts& parts);

// One part (the request itself, moved) when it already fits. InvalidArgument
// as SplitForwardRequest: a sequence with num_tokens < 1, a tensor that is
// not a whole number of rows, a single token too large for a message.
absl::StatusOr<std::vector<ForwardPartRefs>> SplitForwardRequestParts(
    wire::ForwardRequestParts request, int64_t max_message_bytes);

}  // namespace gdn::client

#endif  // GDN_CLIENT_FORWARD_PARTS_SPLIT_H_
