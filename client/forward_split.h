// Splitting one ForwardRequest that is too large for one gRPC message into
// several smaller ones sent in order, and merging their responses.
//
// Every tensor of a ForwardRequest except a_log / dt_bias ([Hv], per head) is
// packed over tokens, [T, ...] row-major, so a contiguous range of rows is a
// contiguous byte range. A part takes rows [begin, end) of the packed tokens;
// a sequence cut by a part boundary appears in both parts, the second piece
// starting at position + (tokens already sent). Sending the parts in order
// therefore computes exactly what the one big call would have computed.
#ifndef GDN_CLIENT_FORWARD_SPLIT_H_
#define GDN_CLIENT_FORWARD_SPLIT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gdn/v1/gdn.pb.h"

namespace gdn::client {

// Bytes left for a message's fixed fields (ids, shapes, specs) when sizing
// the parts; generous because specs of many sessions may repeat in parts.
inline constexpr int64_t kForwardMessageSlackBytes = 64 * 1024;

struct ForwardPart {
  v1::ForwardRequest request;
  // For each sequence of `request`: the index of its sequence in the original.
  std::vector<int> original_sequence;
};

// Parts whose request and response (o has the bytes of v) each fit in
// max_message_bytes. One part (a copy) when the request already fits.
// InvalidArgument when the request is inconsistent (row counts of tensors
// differ from T = sum of num_tokens) or when a single token does not fit.
absl::StatusOr<std::vector<ForwardPart>> SplitForwardRequest(
    const v1::ForwardRequest& request, int64_t max_message_bytes);

// `status` of part p of a Forward split in `parts` parts, the part named in
// its message (unchanged when OK or not split). Every client path that
// sends parts reports failures this way.
absl::Status SplitPartStatus(const absl::Status& status, size_t p, size_t parts);

// Concatenates the parts' o in order and takes, per original sequence, the
// position reported by the last part that carried it.
absl::StatusOr<v1::ForwardResponse> MergeForwardResponses(
    const v1::ForwardRequest& original, const std::vector<ForwardPart>& parts,
    const std::vector<v1::ForwardResponse>& responses);

}  // namespace gdn::client

#endif  // GDN_CLIENT_FORWARD_SPLIT_H_
