#include "client/forward_split.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gdn::client {
namespace {

// The token-packed tensor fields of a ForwardRequest ([T, ...] row-major).
using TensorField = v1::Tensor* (v1::ForwardRequest::*)();
using ConstTensorField = const v1::Tensor& (v1::ForwardRequest::*)() const;
struct PackedField {
  const char* name;
  ConstTensorField get;
  TensorField mutable_get;
};
const PackedField kPackedFields[] = {
    {"q", &v1::ForwardRequest::q, &v1::ForwardRequest::mutable_q},
    {"k", &v1::ForwardRequest::k, &v1::ForwardRequest::mutable_k},
    {"v", &v1::ForwardRequest::v, &v1::ForwardRequest::mutable_v},
    {"g", &v1::ForwardRequest::g, &v1::ForwardRequest::mutable_g},
    {"beta", &v1::ForwardRequest::beta, &v1::ForwardRequest::mutable_beta},
    {"a", &v1::ForwardRequest::a, &v1::ForwardRequest::mutable_a},
    {"b", &v1::ForwardRequest::b, &v1::ForwardRequest::mutable_b},
};

// Rows [begin, end) of a tensor packed over `total_rows` rows.
v1::Tensor SliceRows(const v1::Tensor& t, int64_t total_rows, int64_t begin,
                     int64_t end) {
  v1::Tensor out;
  out.set_dtype(t.dtype());
  for (int64_t d : t.shape()) out.add_shape(d);
  if (out.shape_size() > 0) out.set_shape(0, end - begin);
  const size_t row_bytes = t.data().size() / static_cast<size_t>(total_rows);
  out.set_data(t.data().substr(begin * row_bytes, (end - begin) * row_bytes));
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ForwardPart>> SplitForwardRequest(
    const v1::ForwardRequest& request, int64_t max_message_bytes) {
  int64_t total_tokens = 0;
  for (const v1::SequenceSpec& s : request.sequences()) {
    if (s.num_tokens() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence '", s.session_id(), "' has num_tokens ", s.num_tokens()));
    }
    total_tokens += s.num_tokens();
  }
  const int64_t request_bytes = static_cast<int64_t>(request.ByteSizeLong());
  const int64_t response_bytes =
      static_cast<int64_t>(request.v().data().size()) + kForwardMessageSlackBytes;
  if (total_tokens == 0 ||
      (request_bytes <= max_message_bytes && response_bytes <= max_message_bytes)) {
    ForwardPart whole;
    whole.request = request;
    for (int i = 0; i < request.sequences_size(); ++i) {
      whole.original_sequence.push_back(i);
    }
    return std::vector<ForwardPart>{std::move(whole)};
  }

  // Bytes per token row of the request, and of the response (o is like v).
  int64_t request_row_bytes = 0;
  int64_t packed_bytes = 0;
  for (const PackedField& f : kPackedFields) {
    const v1::Tensor& t = (request.*f.get)();
    if (t.data().empty()) continue;
    const int64_t bytes = static_cast<int64_t>(t.data().size());
    if (bytes % total_tokens != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", f.name, " has ", bytes,
                       " bytes, not a whole number of rows for T = ",
                       total_tokens));
    }
    request_row_bytes += bytes / total_tokens;
    packed_bytes += bytes;
  }
  const int64_t response_row_bytes =
      static_cast<int64_t>(request.v().data().size()) / total_tokens;
  const int64_t fixed_bytes =
      request_bytes - packed_bytes + kForwardMessageSlackBytes;
  const int64_t row_bytes = std::max(request_row_bytes, response_row_bytes);
  const int64_t rows_per_part =
      row_bytes == 0 ? total_tokens : (max_message_bytes - fixed_bytes) / row_bytes;
  if (rows_per_part < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "one token (", row_bytes, " bytes + ", fixed_bytes,
        " bytes of other fields) does not fit in a message of ",
        max_message_bytes, " bytes"));
  }

  std::vector<ForwardPart> parts;
  int seq = 0;
  int64_t taken_of_seq = 0;  // tokens of sequence `seq` already in parts
  for (int64_t begin = 0; begin < total_tokens; begin += rows_per_part) {
    const int64_t end = std::min(total_tokens, begin + rows_per_part);
    ForwardPart part;
    part.request.set_layer(request.layer());
    part.request.set_request_id(request.request_id());
    int64_t row = begin;
    while (row < end) {
      const v1::SequenceSpec& s = request.sequences(seq);
      const int64_t take = std::min<int64_t>(s.num_tokens() - taken_of_seq, end - row);
      v1::SequenceSpec* piece = part.request.add_sequences();
      piece->set_session_id(s.session_id());
      piece->set_position(s.position() + taken_of_seq);
      piece->set_num_tokens(static_cast<int32_t>(take));
      part.original_sequence.push_back(seq);
      row += take;
      taken_of_seq += take;
      if (taken_of_seq == s.num_tokens()) {
        ++seq;
        taken_of_seq = 0;
      }
    }
    for (const PackedField& f : kPackedFields) {
      const v1::Tensor& t = (request.*f.get)();
      if (t.data().empty() && t.shape_size() == 0) continue;
      *(part.request.*f.mutable_get)() = SliceRows(t, total_tokens, begin, end);
    }
    if (request.has_a_log()) *part.request.mutable_a_log() = request.a_log();
    if (request.has_dt_bias()) *part.request.mutable_dt_bias() = request.dt_bias();
    parts.push_back(std::move(part));
  }
  return parts;
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
