#include "client/forward_split.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/forward_parts_split.h"
#include "proto/forward_wire.h"

namespace gdn::client {
namespace {

// The tensor fields of a ForwardRequest and of its wire::ForwardRequestParts
// view, side by side.
struct TensorField {
  bool (v1::ForwardRequest::*has)() const;
  const v1::Tensor& (v1::ForwardRequest::*get)() const;
  v1::Tensor* (v1::ForwardRequest::*mutable_get)();
  wire::TensorParts wire::ForwardRequestParts::*parts;
};
const TensorField kTensorFields[] = {
    {&v1::ForwardRequest::has_q, &v1::ForwardRequest::q, &v1::ForwardRequest::mutable_q,
     &wire::ForwardRequestParts::q},
    {&v1::ForwardRequest::has_k, &v1::ForwardRequest::k, &v1::ForwardRequest::mutable_k,
     &wire::ForwardRequestParts::k},
    {&v1::ForwardRequest::has_v, &v1::ForwardRequest::v, &v1::ForwardRequest::mutable_v,
     &wire::ForwardRequestParts::v},
    {&v1::ForwardRequest::has_g, &v1::ForwardRequest::g, &v1::ForwardRequest::mutable_g,
     &wire::ForwardRequestParts::g},
    {&v1::ForwardRequest::has_beta, &v1::ForwardRequest::beta, &v1::ForwardRequest::mutable_beta,
     &wire::ForwardRequestParts::beta},
    {&v1::ForwardRequest::has_a, &v1::ForwardRequest::a, &v1::ForwardRequest::mutable_a,
     &wire::ForwardRequestParts::a},
    {&v1::ForwardRequest::has_b, &v1::ForwardRequest::b, &v1::ForwardRequest::mutable_b,
     &wire::ForwardRequestParts::b},
    {&v1::ForwardRequest::has_a_log, &v1::ForwardRequest::a_log,
     &v1::ForwardRequest::mutable_a_log, &wire::ForwardRequestParts::a_log},
    {&v1::ForwardRequest::has_dt_bias, &v1::ForwardRequest::dt_bias,
     &v1::ForwardRequest::mutable_dt_bias, &wire::ForwardRequestParts::dt_bias},
};

// `request` as parts whose payloads reference its own strings (it outlives
// the split).
wire::ForwardRequestParts PartsOf(const v1::ForwardRequest& request) {
  wire::ForwardRequestParts parts;
  parts.layer = request.layer();
  parts.request_id = request.request_id();
  for (const v1::SequenceSpec& s : request.sequences()) {
    parts.sequences.push_back(
        {s.session_id(), s.position(), s.num_tokens(), s.draft(), s.checkpoint_interval()});
  }
  for (const TensorField& f : kTensorFields) {
    if (!(request.*f.has)()) continue;
    const v1::Tensor& t = (request.*f.get)();
    wire::TensorParts& out = parts.*f.parts;
    out.dtype = t.dtype();
    out.shape.assign(t.shape().begin(), t.shape().end());
    if (!t.data().empty()) out.data.push_back({t.data().data(), t.data().size(), nullptr});
  }
  return parts;
}

// A part as a message of its own (its tensor bytes copied out of the runs).
v1::ForwardRequest MessageOf(const wire::ForwardRequestParts& parts) {
  v1::ForwardRequest request;
  request.set_layer(parts.layer);
  request.set_request_id(parts.request_id);
  for (const wire::SequenceField& s : parts.sequences) {
    v1::SequenceSpec* spec = request.add_sequences();
    spec->set_session_id(s.session_id);
    spec->set_position(s.position);
    spec->set_num_tokens(s.num_tokens);
    if (s.draft) spec->set_draft(true);
    if (s.checkpoint_interval != 0) spec->set_checkpoint_interval(s.checkpoint_interval);
  }
  for (const TensorField& f : kTensorFields) {
    const wire::TensorParts& t = parts.*f.parts;
    if (!t.present()) continue;
    v1::Tensor* out = (request.*f.mutable_get)();
    out->set_dtype(t.dtype);
    for (int64_t d : t.shape) out->add_shape(d);
    for (const wire::BytesRef& run : t.data) {
      out->mutable_data()->append(static_cast<const char*>(run.data), run.size);
    }
  }
  return request;
}

}  // namespace

// The split itself is SplitForwardRequestParts' (forward_parts_split.h), on
// a view of the message.
absl::StatusOr<std::vector<ForwardPart>> SplitForwardRequest(
    const v1::ForwardRequest& request, int64_t max_message_bytes) {
  absl::StatusOr<std::vector<ForwardPartRefs>> refs =
      SplitForwardRequestParts(PartsOf(request), max_message_bytes);
  if (!refs.ok()) return refs.status();
  std::vector<ForwardPart> parts(refs->size());
  for (size_t p = 0; p < refs->size(); ++p) {
    parts[p].request = refs->size() == 1 ? request : MessageOf((*refs)[p].request);
    parts[p].original_sequence = std::move((*refs)[p].original_sequence);
  }
  return parts;
}

absl::Status SplitPartStatus(const absl::Status& status, size_t p, size_t parts) {
  if (status.ok() || parts <= 1) return status;
  return absl::Status(status.code(), absl::StrCat("part ", p + 1, " of ", parts,
                                                  " of a split Forward: ", status.message()));
}

absl::StatusOr<v1::ForwardResponse> MergeForwardResponses(
    const v1::ForwardRequest& original, const std::vector<ForwardPart>& parts,
    const std::vector<v1::ForwardResponse>& responses) {
  if (parts.size() != responses.size() || parts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "merge of ", responses.size(), " responses for ", parts.size(), " parts"));
  }
  if (parts.size() == 1) return responses[0];
  v1::ForwardResponse merged;
  merged.set_request_id(original.request_id());
  std::vector<int64_t> positions(original.sequences_size(), -1);
  int64_t rows = 0;
  std::string data;
  for (size_t p = 0; p < parts.size(); ++p) {
    const v1::ForwardResponse& r = responses[p];
    if (r.positions_size() != parts[p].request.sequences_size()) {
      return absl::InternalError(absl::StrCat(
          "part ", p, " answered ", r.positions_size(), " positions for ",
          parts[p].request.sequences_size(), " sequences"));
    }
    for (int i = 0; i < r.positions_size(); ++i) {
      positions[parts[p].original_sequence[i]] = r.positions(i);
    }
    if (p == 0) {
      merged.mutable_o()->set_dtype(r.o().dtype());
      for (int64_t d : r.o().shape()) merged.mutable_o()->add_shape(d);
    }
    if (r.o().shape_size() > 0) rows += r.o().shape(0);
    data.append(r.o().data());
  }
  if (merged.o().shape_size() > 0) merged.mutable_o()->set_shape(0, rows);
  merged.mutable_o()->set_data(std::move(data));
  for (int64_t pos : positions) merged.add_positions(pos);
  return merged;
}

}  // namespace gdn::client
