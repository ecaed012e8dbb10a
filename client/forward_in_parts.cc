#include "client/forward_in_parts.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/forward_parts_split.h"
#include "client/forward_split.h"

namespace gdn::client {

absl::Status ForwardInParts(ParallelForwardStreams& streams, wire::ForwardRequestParts request,
                            int64_t part_bytes, absl::Span<char> o,
                            std::vector<int64_t>* positions) {
  size_t v_bytes = 0;
  for (const wire::BytesRef& run : request.v.data) v_bytes += run.size;
  int64_t tokens = 0;
  for (const wire::SequenceField& s : request.sequences) tokens += s.num_tokens;
  if (request.v.has_ref || request.has_o_region) {
    return absl::InvalidArgumentError(
        "ForwardInParts: v must be inline (it sizes o) and o cannot go to a region");
  }
  if (o.size() != v_bytes || tokens <= 0 || v_bytes % tokens != 0) {
    return absl::InvalidArgumentError(absl::StrCat("ForwardInParts: o holds ", o.size(),
                                                   " bytes, v ", v_bytes, " over ", tokens,
                                                   " tokens"));
  }
  const size_t o_row = v_bytes / tokens;
  const size_t sequences = request.sequences.size();
  absl::StatusOr<std::vector<ForwardPartRefs>> parts =
      SplitForwardRequestParts(std::move(request), part_bytes);
  if (!parts.ok()) return parts.status();
  const size_t n = parts->size();
  std::vector<grpc::ByteBuffer> messages(n);
  std::vector<uint64_t> ids(n);
  for (size_t p = 0; p < n; ++p) {
    // Ids 1..n: every stream has nothing in flight between calls.
    ids[p] = p + 1;
    (*parts)[p].request.request_id = ids[p];
    grpc::ByteBuffer encoded = wire::EncodeForwardRequest((*parts)[p].request);
    messages[p].Swap(&encoded);
  }
  const std::vector<absl::StatusOr<RawForwardResponse>> results = streams.Forward(
      messages, ids, ConnectionsInTurn(n, streams.connections()), PartPredecessors(*parts));
  const size_t failed = FirstOwnFailure(results);
  if (failed < n) return SplitPartStatus(results[failed].status(), failed, n);
  positions->assign(sequences, 0);
  size_t row = 0;  // the part's first token row in the whole call
  for (size_t p = 0; p < n; ++p) {
    const ForwardPartRefs& part = (*parts)[p];
    const wire::ForwardResponseFields& fields = results[p]->fields;
    size_t rows = 0;
    for (const wire::SequenceField& s : part.request.sequences) rows += s.num_tokens;
    if (fields.o.data.size != rows * o_row ||
        fields.positions.size() != part.original_sequence.size()) {
      return SplitPartStatus(
          absl::InternalError(absl::StrCat("the answer holds ", fields.o.data.size, " bytes of o and ",
                                           fields.positions.size(), " positions, expected ",
                                           rows * o_row, " and ", part.original_sequence.size())),
          p, n);
    }
    results[p]->message.CopyTo(fields.o.data, o.data() + row * o_row);
    for (size_t i = 0; i < part.original_sequence.size(); ++i) {
      (*positions)[part.original_sequence[i]] = fields.positions[i];  // the last piece's wins
    }
    row += rows;
  }
  return absl::OkStatus();
}

}  // namespace gdn::client
